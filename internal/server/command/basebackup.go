package command

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/vacuumops/vacuum-operator/internal/replication"
)

// primaryFlags are the flags that reach a primary, with the runner's libpq conventions
// (decisions.md): --user, --password-file, else PGPASSWORD or ~/.pgpass, --sslmode,
// --sslrootcert.
type primaryFlags struct {
	from, user, passwordFile, sslmode, sslrootcert string
}

func (f *primaryFlags) register(fs *pflag.FlagSet, fromFlag, fromHelp string) {
	fs.StringVar(&f.from, fromFlag, "", fromHelp)
	fs.StringVar(&f.user, "user", "", "replication user (default: PGUSER, else the OS user)")
	fs.StringVar(&f.passwordFile, "password-file", "", "file holding the password (default: PGPASSWORD, else ~/.pgpass)")
	fs.StringVar(&f.sslmode, "sslmode", "", "libpq sslmode (default: PGSSLMODE, else prefer)")
	fs.StringVar(&f.sslrootcert, "sslrootcert", "", "CA certificate for sslmode verify-ca or verify-full")
}

func (f *primaryFlags) config(cmd, fromFlag, app string) (replication.ConnConfig, error) {
	host, port, err := net.SplitHostPort(f.from)
	if err != nil || host == "" || port == "" {
		return replication.ConnConfig{}, usagef("%s: --%s must be HOST:PORT, not %q", cmd, fromFlag, f.from)
	}
	cc := replication.ConnConfig{Host: host, Port: port, User: f.user, SSLMode: f.sslmode, SSLRootCert: f.sslrootcert, AppName: app}
	if f.passwordFile != "" {
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return cc, usagef("%s: --password-file: %v", cmd, err)
		}
		cc.Password = strings.TrimRight(string(b), "\r\n")
	}
	return cc, nil
}

func runBaseBackup(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("basebackup")
	var pf primaryFlags
	pf.register(fs, "from", "the primary's PostgreSQL address, HOST:PORT")
	data := fs.String("data", "", "directory to create (absent or empty)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *data == "" || pf.from == "" {
		return usagef("basebackup: --from and --data are required")
	}
	cc, err := pf.config("basebackup", "from", "engine-server basebackup")
	if err != nil {
		return err
	}
	conn, err := cc.Connect(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	res, err := replication.BaseBackup(ctx, conn, *data)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "base backup of system %d in %s: %d files, %d bytes, WAL %s to %s\n",
		res.SystemID, *data, res.Files, res.Bytes, replication.FormatLSN(res.Redo), replication.FormatLSN(res.End))
	return nil
}
