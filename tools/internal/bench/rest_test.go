package bench

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A REST call sends its body as its content type and is an error, naming the request, the
// status and the answer, unless the answer is a 2xx.
func TestRestCall(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+string(b))
		if r.URL.Path == "/refused" {
			http.Error(w, "no such subject", http.StatusNotFound)
			return
		}
	}))
	defer srv.Close()
	if err := restCall(t.Context(), srv.Client(), http.MethodPost, srv.URL+"/ok", "application/json", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	err := restCall(t.Context(), srv.Client(), http.MethodDelete, srv.URL+"/refused", "", nil)
	if err == nil || !strings.Contains(err.Error(), "DELETE "+srv.URL+"/refused: 404 Not Found: no such subject") {
		t.Errorf("refused: %v", err)
	}
	want := []string{`POST /ok application/json {"a":1}`, "DELETE /refused  "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("requests %q, want %q", got, want)
	}
}
