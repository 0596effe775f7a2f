// Package report is the vocabulary of a backend's /pool answer that the rest of pollbal shares:
// one Report per service line, and the Load its X-Pool-Load header carries. The poller parses
// answers into them, the balancer schedules by them and the warning round groups the Reports;
// this package imports nothing of pollbal, so each of them can use the one type without
// importing the others.
package report
