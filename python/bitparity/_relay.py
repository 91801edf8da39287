"""The pytest plugin's external subject: copies bytes between its stdin and
stdout and the Unix socket named by ``$BITPARITY_RELAY_SOCKET``, where the
plugin's server answers with the test's own functions (any callable: a
closure, a lambda, a function defined inside the test), in the pytest
process.

bitparity runs it as ``exec:bitparity-relay`` (a wrapper the plugin writes,
on the PATH it gives the CLI): the command line, and so the subject's name
in the reports and in the corpus entries, is the same on every run and
machine; only the environment says where the socket is. bitparity may start
several relays at once (one per worker thread) and restart one that broke:
each is one connection to the server.

Standard library only, and run as a script (``python -I _relay.py``): it
imports nothing of bitparity.
"""
import os
import socket
import sys
import threading

ENV = "BITPARITY_RELAY_SOCKET"
CHUNK = 1 << 16


def _pump_in(sock):
    """stdin -> socket; at the end of stdin, the socket's write side is shut
    so that the server sees the end of the stream too."""
    try:
        while True:
            data = os.read(0, CHUNK)
            if not data:
                break
            sock.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def main():
    path = os.environ.get(ENV)
    if not path:
        sys.stderr.write("bitparity-relay: $%s is not set: this subject runs only under the pytest plugin "
                         "(the `bitparity` fixture)\n" % ENV)
        return 2
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as e:
        sys.stderr.write("bitparity-relay: cannot connect to the test's server at %s: %s\n" % (path, e))
        return 2
    threading.Thread(target=_pump_in, args=(sock,), daemon=True).start()
    # socket -> stdout, until the server closes the connection.
    try:
        while True:
            data = sock.recv(CHUNK)
            if not data:
                break
            view = memoryview(data)
            while view:
                view = view[os.write(1, view):]
    except OSError as e:
        sys.stderr.write("bitparity-relay: %s\n" % (e,))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
