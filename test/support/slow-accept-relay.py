#!/usr/bin/env python3
"""A loopback TCP relay whose listen queue is kept full until it is released: a server that
is slow to accept (SYNs are dropped, the client retransmits them), the way a rail's TCP
handshake can take seconds. Node cannot listen without accepting, hence this helper.

  slow-accept-relay.py TARGET_PORT [WATCH_REGEX]

Prints {"port": N} once listening (queue full). Reads lines on stdin: "release" accepts every
waiting connection and relays each to 127.0.0.1:TARGET_PORT from then on; "freeze" stops relaying
in both directions (bytes are held, connections stay open: a partition, or a peer whose window
stays shut), "thaw" resumes. Prints
{"event": "accepted", "n": K} for each relayed connection, and {"event": "seen", "match": M}
for each match of WATCH_REGEX in the bytes a client sent (what left the client, whatever the
server then does with it). Exits when stdin closes.
"""
import json
import re
import select
import socket
import sys
import threading

target = int(sys.argv[1])
watch = re.compile(sys.argv[2].encode()) if len(sys.argv) > 2 else None
lock = threading.Lock()
flowing = threading.Event()
flowing.set()


def say(obj):
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
# Backlog 0: one completed connection fills the accept queue, and every SYN after it is dropped
# until accept() makes room (Linux: tcp_conn_request drops on a full accept queue).
listener.listen(0)
port = listener.getsockname()[1]
filler = socket.create_connection(("127.0.0.1", port))


def pipe(src, dst, watched=False):
    seen = b""
    try:
        while True:
            # While frozen nothing is read: what the client sent stays in the kernel's buffers (a
            # partition), and a client that resets its connection takes it back with the RST.
            flowing.wait()
            if not select.select([src], [], [], 0.05)[0] or not flowing.is_set():
                continue
            data = src.recv(65536)
            if not data:
                break
            if watched and watch is not None:
                seen += data
                for m in watch.findall(seen):
                    say({"event": "seen", "match": m.decode("latin-1")})
                seen = seen[-256:]
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve():
    accepted = 0
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        if conn.getpeername()[1] == filler.getsockname()[1]:
            conn.close()
            continue
        accepted += 1
        upstream = socket.create_connection(("127.0.0.1", target))
        threading.Thread(target=pipe, args=(conn, upstream, True), daemon=True).start()
        threading.Thread(target=pipe, args=(upstream, conn), daemon=True).start()
        say({"event": "accepted", "n": accepted})


say({"port": port})
for line in sys.stdin:
    command = line.strip()
    if command == "release":
        threading.Thread(target=serve, daemon=True).start()
        say({"event": "released"})
    elif command == "freeze":
        flowing.clear()
        say({"event": "frozen"})
    elif command == "thaw":
        flowing.set()
        say({"event": "thawed"})
listener.close()
