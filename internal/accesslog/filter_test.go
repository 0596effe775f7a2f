package accesslog

import (
	"testing"
	"time"

	"pollbal/configs"
)

func TestFilterKeep(t *testing.T) {
	type conf struct {
		statuses []string
		min      time.Duration
		sample   float64
	}
	all := conf{sample: 1}
	tests := []struct {
		name     string
		conf     conf
		status   int
		duration time.Duration
		own      bool
		draw     float64
		want     bool
	}{
		{name: "no filter logs every request", conf: all, status: 200, want: true},
		{name: "no filter, the highest draw", conf: all, status: 200, draw: 0.999999, want: true},
		{name: "listed status", conf: conf{statuses: []string{"429"}, sample: 1}, status: 429, want: true},
		{name: "status not listed", conf: conf{statuses: []string{"429"}, sample: 1}, status: 200, want: false},
		{name: "listed class, any case", conf: conf{statuses: []string{"4XX"}, sample: 1}, status: 404, want: true},
		{name: "class bounds: 399 is not 4xx", conf: conf{statuses: []string{"4xx"}, sample: 1}, status: 399, want: false},
		{name: "class bounds: 499 is", conf: conf{statuses: []string{"4xx"}, sample: 1}, status: 499, want: true},
		{name: "slow request whatever its status", conf: conf{statuses: []string{"429"}, min: time.Second, sample: 1},
			status: 200, duration: 1500 * time.Millisecond, want: true},
		{name: "exactly min_duration is not slower", conf: conf{statuses: []string{"429"}, min: time.Second, sample: 1},
			status: 200, duration: time.Second, want: false},
		{name: "fast request with a status not listed", conf: conf{statuses: []string{"429"}, min: time.Second, sample: 1},
			status: 200, duration: 10 * time.Millisecond, want: false},
		{name: "min_duration 0 adds nothing", conf: conf{statuses: []string{"429"}, sample: 1},
			status: 200, duration: time.Hour, want: false},
		{name: "5xx skips statuses", conf: conf{statuses: []string{"429"}, sample: 1}, status: 502, want: true},
		{name: "5xx skips sample", conf: conf{sample: 0.01}, status: 503, draw: 0.5, want: true},
		{name: "599 is a 5xx", conf: conf{statuses: []string{"2xx"}, sample: 0.01}, status: 599, draw: 0.9, want: true},
		{name: "own answer skips statuses", conf: conf{statuses: []string{"5xx"}, sample: 1}, status: 404, own: true, want: true},
		{name: "own answer skips sample", conf: conf{sample: 0.01}, status: 413, own: true, draw: 0.9, want: true},
		{name: "sampled in: draw below sample", conf: conf{sample: 0.25}, status: 200, draw: 0.2, want: true},
		{name: "sampled out: draw at sample", conf: conf{sample: 0.25}, status: 200, draw: 0.25, want: false},
		{name: "sampled out: draw above sample", conf: conf{sample: 0.25}, status: 200, draw: 0.9, want: false},
		{name: "listed, then sampled out", conf: conf{statuses: []string{"404"}, sample: 0.5}, status: 404, draw: 0.7, want: false},
		{name: "slow, then sampled in", conf: conf{statuses: []string{"404"}, min: time.Millisecond, sample: 0.5},
			status: 200, duration: time.Second, draw: 0.1, want: true},
		{name: "no status sent (client gone) with statuses listed", conf: conf{statuses: []string{"4xx"}, sample: 1}, status: 0, want: false},
		{name: "no status sent without a filter", conf: all, status: 0, want: true},
		{name: "status beyond 599 from a backend", conf: conf{statuses: []string{"5xx"}, sample: 1}, status: 999, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewFilter(configs.AccessLog{Statuses: tt.conf.statuses, MinDuration: tt.conf.min, Sample: tt.conf.sample})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Keep(tt.status, tt.duration, tt.own, tt.draw); got != tt.want {
				t.Errorf("Keep(%d, %v, own %v, draw %v) = %v, want %v", tt.status, tt.duration, tt.own, tt.draw, got, tt.want)
			}
		})
	}
}

func TestNewFilterRejects(t *testing.T) {
	tests := []struct {
		name string
		conf configs.AccessLog
	}{
		{name: "sample 0", conf: configs.AccessLog{Sample: 0}},
		{name: "sample above 1", conf: configs.AccessLog{Sample: 1.01}},
		{name: "bad status", conf: configs.AccessLog{Sample: 1, Statuses: []string{"6xx"}}},
	}
	for _, tt := range tests {
		if _, err := NewFilter(tt.conf); err == nil {
			t.Errorf("%s: NewFilter accepted %+v", tt.name, tt.conf)
		}
	}
}

func TestFilterSampled(t *testing.T) {
	for sample, want := range map[float64]bool{1: false, 0.5: true, 0.001: true} {
		f, err := NewFilter(configs.AccessLog{Sample: sample})
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Sampled(); got != want {
			t.Errorf("sample %v: Sampled() = %v, want %v", sample, got, want)
		}
	}
}
