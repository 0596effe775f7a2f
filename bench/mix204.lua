-- One request in ten asks for /204 (an answer without a body), the rest for / (1 KiB): a load
-- with some bodiless answers, for bench/run.sh's WRK_SCRIPT.
local n = 0
request = function()
  n = n + 1
  if n % 10 == 0 then
    return wrk.format("GET", "/204")
  end
  return wrk.format("GET", "/")
end
