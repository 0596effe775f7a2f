package h2client

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Client is a raw HTTP/2 client on one connection: one goroutine writes HEADERS frames, the
// reader counts ended streams and returns flow-control credit. Run is called by one goroutine
// at a time.
type Client struct {
	c     net.Conn
	mu    sync.Mutex // guards bw and fr's writes
	bw    *bufio.Writer
	fr    *http2.Framer
	block []byte // the request's header block
	next  uint32 // the next stream's id
}

// Dial connects to the h2c server at addr and sends the preface; every request asks for
// path on authority.
func Dial(addr, authority, path string) (*Client, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	cl := &Client{c: c, bw: bufio.NewWriterSize(c, 64<<10), next: 1}
	cl.fr = http2.NewFramer(cl.bw, bufio.NewReaderSize(c, 64<<10))
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", authority},
		{":path", path}, {"user-agent", "bench"}, {"accept", "*/*"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	cl.block = hb.Bytes()
	_, _ = cl.bw.WriteString(http2.ClientPreface)
	_ = cl.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	_ = cl.fr.WriteWindowUpdate(0, 1<<30)
	if err := cl.bw.Flush(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return cl, nil
}

// Close closes the connection.
func (cl *Client) Close() error { return cl.c.Close() }

// Run sends n requests, streams at a time, and returns once all were answered.
func (cl *Client) Run(n, streams int) error {
	credit := make(chan struct{}, streams)
	for range streams {
		credit <- struct{}{}
	}
	errc := make(chan error, 1)
	go func() { errc <- cl.read(n, credit) }()
	id := cl.next
	defer func() { cl.next = id }()
	for i := 0; i < n; i++ {
		select {
		case <-credit:
		case err := <-errc:
			return err
		}
		// Send what is due in one write: a batch of streams whose credit is already there.
		cl.mu.Lock()
		if err := cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: cl.block, EndStream: true, EndHeaders: true}); err != nil {
			cl.mu.Unlock()
			return err
		}
		id += 2
		for ; i+1 < n && len(credit) > 0; i++ {
			<-credit
			_ = cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: cl.block, EndStream: true, EndHeaders: true})
			id += 2
		}
		err := cl.bw.Flush()
		cl.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return <-errc
}

func (cl *Client) read(n int, credit chan<- struct{}) error {
	var owed uint32
	for done := 0; done < n; {
		f, err := cl.fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				cl.mu.Lock()
				_ = cl.fr.WriteSettingsAck()
				err = cl.bw.Flush()
				cl.mu.Unlock()
			}
		case *http2.DataFrame:
			owed += f.Length
			if f.StreamEnded() {
				done++
				credit <- struct{}{}
			}
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				done++
				credit <- struct{}{}
			}
		case *http2.RSTStreamFrame:
			return errors.New("stream reset by the server")
		case *http2.GoAwayFrame:
			return errors.New("goaway from the server")
		}
		if err != nil {
			return err
		}
		if owed > 1<<28 {
			cl.mu.Lock()
			_ = cl.fr.WriteWindowUpdate(0, owed)
			err = cl.bw.Flush()
			cl.mu.Unlock()
			owed = 0
			if err != nil {
				return err
			}
		}
	}
	return nil
}
