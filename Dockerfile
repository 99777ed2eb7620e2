# Multi-stage build of the one image that holds the three binaries: the manager
# (the operator), vacuum-runner (what runner pods execute) and engine-server (the
# engine as a PostgreSQL-protocol server; the one cgo binary, linked static as
# `make engine-server` links it). Docker does not
# run on the project's build machines; `make image-tar` builds the same layout
# without Docker (see README).
FROM golang:1.27.3 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0 GOOS=linux
RUN go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager && \
    go build -trimpath -ldflags "-s -w" -o /out/vacuum-runner ./cmd/vacuum-runner
RUN CGO_ENABLED=1 go build -trimpath -tags netgo,osusergo \
    -ldflags "-s -w -linkmode external -extldflags -static" -o /out/engine-server ./cmd/engine-server

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/manager /manager
COPY --from=build /out/vacuum-runner /vacuum-runner
COPY --from=build /out/engine-server /engine-server
USER 65532:65532
ENTRYPOINT ["/manager"]
