package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

// Relay builds cmd/cdc-relay of the module around the working directory into dir, with the
// race detector when race is set, and returns the binary's path.
func Relay(ctx context.Context, dir string, race bool) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "cdc-relay")
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/cdc-relay")...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build cdc-relay: %w\n%s", err, b)
	}
	return out, nil
}

// ModuleRoot returns the relay module's root: the nearest directory at or above the working
// directory whose go.mod declares github.com/cdc-relay/cdc-relay (from tools/, the one above).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && relayModule.Match(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the go.mod of github.com/cdc-relay/cdc-relay was not found above the working directory")
		}
		dir = parent
	}
}

var relayModule = regexp.MustCompile(`(?m)^module github\.com/cdc-relay/cdc-relay\s*$`)
