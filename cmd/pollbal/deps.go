package main
import (
 _ "github.com/valyala/fasthttp"
 _ "github.com/hashicorp/go-multierror"
 _ "gopkg.in/yaml.v3"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "github.com/cenkalti/backoff/v4"
)
func main(){}
