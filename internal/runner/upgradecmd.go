package runner

import (
	"context"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine"
)

// UpgradeOutput is `upgrade --json`.
type UpgradeOutput struct {
	From     uint32 `json:"from"`
	To       uint32 `json:"to"`
	Upgraded bool   `json:"upgraded"`
}

// cmdUpgrade brings a data directory of an older format version to this
// build's (engine.Upgrade: crash-safe, and a no-op on a current one).
func cmdUpgrade(ctx context.Context, args []string, env Env) error {
	f, err := parseDataFlags("upgrade", args)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	res, err := engine.Upgrade(f.data, engine.Options{Logf: engineLog(env.Stderr), LockTimeout: f.lockTimeout})
	if err != nil {
		return err
	}
	out := UpgradeOutput{From: res.From, To: res.To, Upgraded: res.Upgraded}
	if f.json {
		return writeJSON(env.Stdout, out)
	}
	if !res.Upgraded {
		_, err = fmt.Fprintf(env.Stdout, "%s is already at format version %d\n", f.data, res.To)
		return err
	}
	_, err = fmt.Fprintf(env.Stdout, "upgraded %s from format version %d to %d\n", f.data, res.From, res.To)
	return err
}
