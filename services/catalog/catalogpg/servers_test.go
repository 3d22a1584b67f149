package catalogpg

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/toolplane/toolplane/internal/pgtest"
)

// TestEditServers: rows are stored in list order with their origins, each
// change bumps the version and notifies it, ErrNoChange and a failing edit
// write nothing, a bad origin is refused, the file content survives edits
// that do not set it.
func TestEditServers(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	s := openStore(t, pool)
	c, err := s.LoadServers(ctx)
	if err != nil || c.Version != 0 || len(c.Servers) != 0 || c.FileSHA256 != "" {
		t.Fatalf("fresh store = %+v, %v", c, err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `LISTEN `+ConfigChannel); err != nil {
		t.Fatal(err)
	}
	rows := []ServerRow{
		{Name: "b", Origin: OriginFile, Entry: []byte(`{"command":"node","env":{"T":"${TOKEN}"}}`)},
		{Name: "a", Origin: OriginAPI, Entry: []byte(`{"url":"https://x.example/mcp"}`)},
	}
	got, err := s.EditServers(ctx, func(c *ServerConfig) error {
		c.Servers, c.FileSHA256, c.FileContent = rows, "abc", []byte(`{"mcpServers":{}}`)
		return nil
	})
	if err != nil || got.Version != 1 {
		t.Fatalf("first edit = %+v, %v", got, err)
	}
	n, err := conn.Conn().WaitForNotification(ctx)
	if err != nil || n.Channel != ConfigChannel || n.Payload != "1" {
		t.Fatalf("notification = %+v, %v", n, err)
	}
	c, _ = s.LoadServers(ctx)
	if !reflect.DeepEqual(c.Servers, rows) || c.FileSHA256 != "abc" || string(c.FileContent) != `{"mcpServers":{}}` {
		t.Fatalf("stored = %+v", c)
	}
	// Reorder and drop one: positions follow the list; the file record stays.
	if _, err := s.EditServers(ctx, func(c *ServerConfig) error { c.Servers = c.Servers[1:]; return nil }); err != nil {
		t.Fatal(err)
	}
	c, _ = s.LoadServers(ctx)
	if len(c.Servers) != 1 || c.Servers[0].Name != "a" || c.Version != 2 || c.FileSHA256 != "abc" {
		t.Fatalf("after the second edit = %+v", c)
	}
	// Nothing written: ErrNoChange (returns the configuration read), an
	// edit's own error (returned as is), a bad origin, an entry that is not JSON.
	same, err := s.EditServers(ctx, func(c *ServerConfig) error { c.Servers = nil; return ErrNoChange })
	if err != nil || same.Version != 2 || len(same.Servers) != 1 {
		t.Fatalf("ErrNoChange = %+v, %v", same, err)
	}
	mine := errors.New("refused by the edit")
	if _, err := s.EditServers(ctx, func(c *ServerConfig) error { c.Servers = nil; return mine }); !errors.Is(err, mine) {
		t.Fatalf("edit error = %v", err)
	}
	if _, err := s.EditServers(ctx, func(c *ServerConfig) error { c.Servers[0].Origin = "other"; return nil }); err == nil {
		t.Fatal("a bad origin was stored")
	}
	if _, err := s.EditServers(ctx, func(c *ServerConfig) error { c.Servers[0].Entry = []byte(`{not json`); return nil }); err == nil {
		t.Fatal("an entry that is not JSON was stored")
	}
	if v, err := s.ConfigVersion(ctx); err != nil || v != 2 {
		t.Fatalf("version after refused edits = %d, %v; want 2", v, err)
	}
	c, _ = s.LoadServers(ctx)
	if len(c.Servers) != 1 || c.Servers[0].Name != "a" || string(c.Servers[0].Entry) != `{"url":"https://x.example/mcp"}` {
		t.Fatalf("refused edits changed the rows: %+v", c)
	}
	// Concurrent writers (connections of the pool) are serialised by the
	// row lock: every append lands.
	errs := make(chan error, 20)
	for i := range 20 {
		st := s
		go func() {
			_, err := st.EditServers(ctx, func(c *ServerConfig) error {
				c.Servers = append(c.Servers, ServerRow{Name: "n" + strconv.Itoa(i), Origin: OriginAPI, Entry: []byte(`{}`)})
				return nil
			})
			errs <- err
		}()
	}
	for range 20 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	c, _ = s.LoadServers(ctx)
	if len(c.Servers) != 21 || c.Version != 22 {
		t.Fatalf("after 20 concurrent appends: %d servers, version %d; want 21, 22", len(c.Servers), c.Version)
	}
}
