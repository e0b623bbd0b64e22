#!/usr/bin/env python3
"""Start-up and memory of a release Lambda binary, without AWS or Docker.

Runs the ingest binary against a stub Lambda Runtime API and stub AWS endpoints (Secrets
Manager, DynamoDB, SQS) on loopback, and reports:
  - ready: time from exec to the first GET /runtime/invocation/next (INIT done: config read,
    secret fetched, clients built, warm-up calls made);
  - the answer to one signed 1 KiB function-URL event, and the peak RSS (VmHWM) after it.
Usage: scripts/measure_startup.py target/release/paymos-ingest [runs]
"""
import hashlib, hmac, http.server, json, os, statistics, subprocess, sys, threading, time

SECRET = "whsec_live_measure"
state = {}


def event():
    now = int(time.time())
    body = json.dumps({"event_id": f"evt_measure_{time.time_ns()}", "event_type": "invoice.paid", "version": 1,
                       "occurred_at": now, "data": {"invoice_id": "inv_measure", "status": "paid", "is_test": False,
                                                    "pad": "x" * 800}}, separators=(",", ":"))
    sig = hmac.new(SECRET.encode(), f"{now}.{body}".encode(), hashlib.sha256).hexdigest()
    return {"version": "2.0", "routeKey": "$default", "rawPath": "/", "rawQueryString": "",
            "headers": {"content-type": "application/json", "x-webhook-signature": f"t={now},v1={sig}"},
            "requestContext": {"accountId": "anonymous", "apiId": "x", "domainName": "x.lambda-url.eu-west-1.on.aws",
                               "domainPrefix": "x", "http": {"method": "POST", "path": "/", "protocol": "HTTP/1.1",
                                                             "sourceIp": "127.0.0.1", "userAgent": "measure"},
                               "requestId": "r", "routeKey": "$default", "stage": "$default", "time": "", "timeEpoch": now * 1000},
            "body": body, "isBase64Encoded": False}


class Stub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, payload, headers=None):
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("content-type", "application/x-amz-json-1.1")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.endswith("/runtime/invocation/next"):
            if "ready" in state:  # second call: the function waits for work; hold it
                time.sleep(30)
                return
            state["ready"] = time.monotonic()
            self.reply(200, event(), {"lambda-runtime-aws-request-id": "req-1",
                                      "lambda-runtime-deadline-ms": str(int(time.time() * 1000) + 6000),
                                      "lambda-runtime-invoked-function-arn": "arn:aws:lambda:eu-west-1:0:function:f"})
        else:
            self.reply(404, {})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        target = self.headers.get("x-amz-target", "")
        if "/runtime/invocation/" in self.path:
            state["response"] = json.loads(body or b"{}")
            state["done"] = time.monotonic()
            self.reply(202, {})
        elif target.endswith("GetSecretValue"):
            self.reply(200, {"Name": "s", "SecretString": json.dumps({"live": SECRET})})
        elif target.endswith("SendMessage"):
            message = json.loads(body).get("MessageBody", "")
            self.reply(200, {"MessageId": "m-1", "MD5OfMessageBody": hashlib.md5(message.encode()).hexdigest()})
        elif target.endswith("GetQueueAttributes"):
            self.reply(200, {"Attributes": {"QueueArn": "arn:aws:sqs:eu-west-1:0:q"}})
        elif target.endswith("DescribeTable"):
            self.reply(200, {"Table": {"TableName": "deliveries", "TableStatus": "ACTIVE"}})
        else:  # PutItem and anything else: success
            self.reply(200, {})


def run_once(binary, port):
    state.clear()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({
        "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{port}", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_LAMBDA_FUNCTION_NAME": "ingest", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
        "AWS_LAMBDA_FUNCTION_VERSION": "1", "AWS_LAMBDA_LOG_STREAM_NAME": "s", "AWS_LAMBDA_LOG_GROUP_NAME": "g",
        "DELIVERIES_TABLE": "deliveries", "WORK_QUEUE_URL": f"http://127.0.0.1:{port}/0/q",
        "WEBHOOK_SECRETS_ID": "paymos-inbox/webhook-secrets", "AWS_LAMBDA_LOG_LEVEL": "warn",
    })
    start = time.monotonic()
    proc = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = start + 20
    while "done" not in state and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.002)
    rss_kib = 0
    try:
        with open(f"/proc/{proc.pid}/status") as f:
            rss_kib = int(next(l for l in f if l.startswith("VmHWM")).split()[1])
    except (OSError, StopIteration):
        pass
    proc.kill()
    proc.wait()
    if "ready" not in state:
        sys.exit("the binary never asked for an event")
    return (state["ready"] - start) * 1000, state.get("response", {}).get("statusCode"), rss_kib


def main():
    binary = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    results = [run_once(binary, server.server_address[1]) for _ in range(runs)]
    ready = [r[0] for r in results]
    print(f"{os.path.basename(binary)}: size {os.path.getsize(binary) / 1048576:.1f} MiB; "
          f"ready for the first event in {statistics.median(ready):.1f} ms (median of {runs}, min {min(ready):.1f}); "
          f"1 KiB event answered {results[0][1]}; peak RSS {max(r[2] for r in results) / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
