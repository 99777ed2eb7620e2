# Multi-stage build of the one image that holds both binaries: the manager
# (the operator) and vacuum-runner (what runner pods execute). Docker does not
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

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/manager /manager
COPY --from=build /out/vacuum-runner /vacuum-runner
USER 65532:65532
ENTRYPOINT ["/manager"]
