#!/bin/sh
# pool-warning.cgi — CGI handler for pollbal's POST /pool_warning (docs/protocol.md).
#
# Touches the lock file that pollbal-update.sh checks, so the backend does not go down while
# pollbal says it is needed. The lock file is $POLLBAL_LOCK_FILE (default
# /var/lib/pollbal/lock); it is created when missing. Answers 204 on success, 405 for any
# method but POST, 500 when the lock cannot be touched.
#
# It does not check X-Pollbal-Signature: restrict who may reach /pool_warning in the web
# server (see examples/nginx/README.md), or use a handler that verifies the HMAC.
set -u

lock=${POLLBAL_LOCK_FILE:-/var/lib/pollbal/lock}

# Consume the request body so the server never sees a half-read request.
case ${CONTENT_LENGTH:-} in
'' | *[!0-9]*) ;;
*) head -c "$CONTENT_LENGTH" >/dev/null 2>&1 || true ;;
esac

if [ "${REQUEST_METHOD:-}" != "POST" ]; then
	printf 'Status: 405 Method Not Allowed\r\nAllow: POST\r\nContent-Type: text/plain\r\n\r\nmethod not allowed\n'
	exit 0
fi

if ! touch -- "$lock" 2>/dev/null; then
	printf 'Status: 500 Internal Server Error\r\nContent-Type: text/plain\r\n\r\ncannot touch lock file\n'
	exit 0
fi

printf 'Status: 204 No Content\r\n\r\n'
