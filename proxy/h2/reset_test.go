package h2

import "testing"

func TestAfterReset(t *testing.T) {
	tests := []struct {
		name     string
		debt     int64
		wantDebt int64
		wantCut  bool
	}{
		{name: "first reset", debt: 0, wantDebt: 1},
		{name: "within the allowance", debt: resetAllowance - 1, wantDebt: resetAllowance},
		{name: "past the allowance", debt: resetAllowance, wantDebt: resetAllowance + 1, wantCut: true},
		{name: "far past", debt: 5 * resetAllowance, wantDebt: 5*resetAllowance + 1, wantCut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debt, cut := afterReset(tt.debt)
			if debt != tt.wantDebt || cut != tt.wantCut {
				t.Errorf("afterReset(%d) = %d, %v; want %d, %v", tt.debt, debt, cut, tt.wantDebt, tt.wantCut)
			}
		})
	}
}

func TestAfterCompleted(t *testing.T) {
	tests := []struct {
		name       string
		debt, want int64
	}{
		{name: "no debt earns no credit", debt: 0, want: 0},
		{name: "pays one reset", debt: 7, want: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := afterCompleted(tt.debt); got != tt.want {
				t.Errorf("afterCompleted(%d) = %d, want %d", tt.debt, got, tt.want)
			}
		})
	}
}

// TestResetPatterns plays sequences of resets (r) and completed streams (c) through the two
// rules and reports whether the connection is cut.
func TestResetPatterns(t *testing.T) {
	repeat := func(s string, n int) string {
		out := ""
		for range n {
			out += s
		}
		return out
	}
	tests := []struct {
		name    string
		events  string
		wantCut bool
	}{
		{name: "rapid reset: every stream reset", events: repeat("r", resetAllowance+1), wantCut: true},
		{name: "a page left: a few dozen resets", events: repeat("c", 20) + repeat("r", 40)},
		{name: "resets paid by completions", events: repeat("rc", 10*resetAllowance)},
		{name: "completions first buy nothing", events: repeat("c", 1000) + repeat("r", resetAllowance+1), wantCut: true},
		{name: "two resets per completion", events: repeat("rrc", resetAllowance+1), wantCut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var debt int64
			cut := false
			for _, ev := range tt.events {
				if ev == 'c' {
					debt = afterCompleted(debt)
					continue
				}
				var c bool
				debt, c = afterReset(debt)
				cut = cut || c
			}
			if cut != tt.wantCut {
				t.Errorf("cut %v, want %v (debt %d)", cut, tt.wantCut, debt)
			}
		})
	}
}
