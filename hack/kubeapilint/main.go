/*
Copyright 2026 The vacuum-operator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command kubeapilint is golangci-lint at the project's pinned version with the Kubernetes
// project's API linter (kube-api-linter) compiled in as a module plugin. `make lint-api` builds
// it into ./bin and runs it on api/ with .golangci-kal.yml.
//
// It exists instead of `golangci-lint custom`, which clones golangci-lint's repository from the
// network at build time: this module is resolved by the Go module proxy like any other, its
// versions pinned in go.mod. It is a module of its own so the operator's go.mod does not carry
// golangci-lint's few hundred dependencies.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/golangci/golangci-lint/v2/pkg/commands"
	"github.com/golangci/golangci-lint/v2/pkg/exitcodes"

	// The plugin registers itself as the "kubeapilinter" module plugin in its init.
	_ "sigs.k8s.io/kube-api-linter"
)

func main() {
	info := commands.BuildInfo{Version: "unknown", Commit: "?", Date: "(unknown)", GoVersion: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.GoVersion = bi.GoVersion
		for _, dep := range bi.Deps {
			if dep.Path == "github.com/golangci/golangci-lint/v2" {
				info.Version = dep.Version + "+kube-api-linter"
			}
		}
	}
	if err := commands.Execute(info); err != nil {
		fmt.Fprintf(os.Stderr, "kubeapilint: %v\n", err)
		os.Exit(exitcodes.Failure)
	}
}
