"""The protocol served on a Unix socket, from threads of this process: the
pytest plugin's side of ``bitparity-relay`` (``_relay.py``). Every
connection is one relay, so one child of bitparity's pool: it gets the
handshake and its replies exactly as ``serve`` gives them on stdin/stdout
(the same ``_Served`` code). The functions are called one at a time,
whatever the number of connections: a kernel under test need not be
thread-safe.
"""
import os
import shutil
import socket
import sys
import tempfile
import threading

from . import _Stream


class SocketServer:
    """Serves ``served`` (a ``bitparity._Served``) on a fresh socket under
    a private temporary folder, until ``close``. Use as a context manager."""

    def __init__(self, served):
        self.served = served
        self.lock = threading.Lock()
        # A short path: a Unix socket's path holds at most 107 bytes, and
        # pytest's own temporary folders can be longer.
        self.folder = tempfile.mkdtemp(prefix="bitparity-")
        self.path = os.path.join(self.folder, "socket")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(16)
        self.connections = set()
        self.guard = threading.Lock()  # over self.connections
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._accept, name="bitparity-server", daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            conn.settimeout(None)
            with self.guard:
                if self.closed.is_set():
                    conn.close()
                    return
                self.connections.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="bitparity-connection", daemon=True).start()

    def _serve(self, conn):
        inp = conn.makefile("rb")
        try:
            self.served.run(_Stream(inp=inp, out=conn.fileno()), lock=self.lock)
        except OSError:
            # bitparity killed this relay (a timeout, a crash it saw) while
            # its reply was being written: nobody reads it any more.
            pass
        except Exception:  # a bug of the server itself: said, never silent
            import traceback
            traceback.print_exc(file=sys.stderr)
        finally:
            with self.guard:
                self.connections.discard(conn)
            try:
                inp.close()
                conn.close()
            except OSError:
                pass

    def close(self):
        self.closed.set()
        try:
            # shutdown, not close alone, wakes a thread blocked in accept().
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self.guard:
            for conn in list(self.connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.thread.join(timeout=5)
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
