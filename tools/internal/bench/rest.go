package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// restCall sends body (nil: none) to u by method through cl, as contentType when it is set,
// and returns an error naming the request, the status and the start of the answer unless the
// answer is a 2xx: a call to the schema registry's or Kafka Connect's REST API.
func restCall(ctx context.Context, cl *http.Client, method, u, contentType string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}
