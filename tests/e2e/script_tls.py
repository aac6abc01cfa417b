"""A TLS client and server on loopback, in one python3 (libssl through its
ssl module): N echoes after the handshake, a self-signed key made by openssl.
The target of test_script_tools.py::test_ssllatency.

    script_tls.py N"""
import os, socket, ssl, subprocess, sys, tempfile, threading
n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
d = tempfile.mkdtemp()
key, crt = os.path.join(d, "k.pem"), os.path.join(d, "c.pem")
subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
                "-days", "1", "-subj", "/CN=localhost"], check=True, capture_output=True)
srv = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); srv.load_cert_chain(crt, key)
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(1)
port = ls.getsockname()[1]
def serve():
    c, _ = ls.accept()
    s = srv.wrap_socket(c, server_side=True)
    for _ in range(n):
        s.sendall(s.recv(100))
    s.close()
t = threading.Thread(target=serve); t.start()
cli = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); cli.check_hostname = False; cli.verify_mode = ssl.CERT_NONE
s = cli.wrap_socket(socket.create_connection(("127.0.0.1", port)))
for i in range(n):
    s.sendall(b"ping %d" % i); s.recv(100)
s.close(); t.join()
print("tls done", n)
