package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/node"
	"github.com/convene/convene/internal/sipusers"
)

const usersUsage = `usage: convene users <command> [args] [config flags]

SIP accounts in the catalog of the node's configuration (-config FILE,
CONVENE_* variables and the flags of 'convene serve' select it). Passwords
are stored only as HA1 digests (MD5 and SHA-256) for the SIP domain.

  convene users add NAME [--password PW] [flags]   without --password, read it from stdin
  convene users list [flags]
  convene users delete NAME [flags]
`

// usersCmd runs `convene users`.
func usersCmd(args, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usersUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	action, rest := args[0], args[1:]
	var name string
	switch action {
	case "add", "delete", "rm":
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			fmt.Fprintf(stderr, "convene users %s: missing user name\n%s", action, usersUsage)
			return 2
		}
		name, rest = rest[0], rest[1:]
	case "list", "ls":
	default:
		fmt.Fprintf(stderr, "convene users: unknown command %q\n%s", action, usersUsage)
		return 2
	}
	password, hasPassword, rest, err := takePassword(rest)
	if err != nil {
		fmt.Fprintln(stderr, "convene users:", err)
		return 2
	}
	cfg, pos, err := config.Load("", env, rest)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usersUsage)
		config.PrintFlags(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "convene users:", err)
		return 2
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "convene users: unexpected arguments %q\n", pos)
		return 2
	}
	cfg = cfg.Resolved()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, cfg.Catalog.Driver, cfg.Catalog.DSN)
	if err != nil {
		fmt.Fprintln(stderr, "convene users:", err)
		return 1
	}
	defer cat.Close()
	us, err := sipusers.New(sipusers.Options{Catalog: cat, Realm: node.SIPRealm(cfg.SIP), MinPassword: cfg.SIP.MinPasswordLength})
	if err != nil {
		fmt.Fprintln(stderr, "convene users:", err)
		return 1
	}
	switch action {
	case "add":
		if !hasPassword {
			line, err := bufio.NewReader(stdin).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				fmt.Fprintln(stderr, "convene users: read password:", err)
				return 1
			}
			password = strings.TrimRight(line, "\r\n")
		}
		u, err := us.Add(ctx, name, password)
		if err != nil {
			fmt.Fprintln(stderr, "convene users:", err)
			return userExit(err)
		}
		fmt.Fprintf(stdout, "added %s (realm %s): register as sip:%s@%s\n", u.Username, u.Realm, u.Username, u.Realm)
	case "delete", "rm":
		if err := us.Delete(ctx, name); err != nil {
			fmt.Fprintln(stderr, "convene users:", err)
			return userExit(err)
		}
		fmt.Fprintf(stdout, "deleted %s\n", name)
	case "list", "ls":
		list, err := us.List(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "convene users:", err)
			return 1
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "USER\tREALM\tCREATED")
		for _, u := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Username, u.Realm, u.CreatedAt.Format("2006-01-02 15:04:05Z07:00"))
		}
		tw.Flush()
	}
	return 0
}

func userExit(err error) int {
	if errors.Is(err, sipusers.ErrInvalid) {
		return 2
	}
	return 1
}

// takePassword removes -password/--password (and its value) from args.
func takePassword(args []string) (pw string, ok bool, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-password" || a == "--password":
			if i+1 >= len(args) {
				return "", false, nil, errors.New("--password needs a value")
			}
			pw, ok = args[i+1], true
			i++
		case strings.HasPrefix(a, "-password=") || strings.HasPrefix(a, "--password="):
			pw, ok = a[strings.IndexByte(a, '=')+1:], true
		default:
			rest = append(rest, a)
		}
	}
	return pw, ok, rest, nil
}
