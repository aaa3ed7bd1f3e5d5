-- wrk script: POSTs one AdmissionReview (read from a file) over and over.
--
--   wrk -t T -c C -d 10s --latency -s bench/wrk/post.lua URL -- BODY_FILE [close]
--
-- With "close" every request carries "Connection: close": both servers
-- close the connection after the response and wrk opens a new TCP and TLS
-- connection for the next request (see docs/benchmarks.md for whether that
-- handshake is a full one or a resumption).
--
-- done() prints one line "IG_RESULT {json}" with the request count, the
-- errors and latency percentiles in microseconds (p99.9 is not in wrk's own
-- --latency table).

local mode = "keep-alive"

function init(args)
  local path = args[1]
  if path == nil then
    error("post.lua: give the body file after --")
  end
  local f = assert(io.open(path, "rb"))
  wrk.body = f:read("*a")
  f:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, */*"
  if args[2] == "close" then
    mode = "close"
    wrk.headers["Connection"] = "close"
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  local p = function(q) return latency:percentile(q) end
  io.write(string.format(
    'IG_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"min":%d,"mean":%.1f,"stdev":%.1f,"p50":%d,"p75":%d,"p90":%d,' ..
    '"p99":%d,"p99.9":%d,"max":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean, latency.stdev, p(50), p(75), p(90), p(99), p(99.9), latency.max))
end
