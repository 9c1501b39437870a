#!/usr/bin/env python3
"""A Vault/OpenBao stand-in for the tests (OpenBao cannot be installed from
Debian). It speaks real TLS and implements exactly what tromcho and the
seed's setup walk-through use, with Vault's JSON shapes:

  POST /v1/auth/cert/login          log in with the TLS client certificate: it
                                    must be, or be issued by, a certificate
                                    registered under auth/cert/certs/<name>;
                                    the token gets that entry's policies and TTL
  POST /v1/auth/token/renew-self    extend the caller's token by its TTL
  GET  /v1/secret/<path>            KV v1 read, if a policy of the token grants
                                    "read" on secret/<path> (403 otherwise, 404
                                    when permitted but absent)
  and, as the operator (root token, or a policy granting create/update/delete):
  PUT  /v1/sys/policy/<name>        {"policy": "<HCL>"}: path "..." { capabilities = [...] }
  POST /v1/auth/cert/certs/<name>   {"certificate": PEM, "display_name", "token_ttl", "token_policies"}
  POST /v1/secret/<path>            KV v1 write (the body is the secret's data)
  DELETE /v1/secret/<path>
  POST /v1/auth/token/revoke        {"token": T}
  LIST /v1/auth/token/accessors     (or GET ?list=true) the accessors of live tokens
  POST /v1/auth/token/revoke-accessor  {"accessor": A}
  GET  /v1/sys/health

Usage: vault-standin.py --port P --cert C --key K --client-ca CA --root-token-file F --state FILE
Everything (policies, certificate entries, secrets, tokens, the root token)
is kept in the state file, so a restarted stand-in is the same Vault.
Each request is logged to stderr as "vault: METHOD PATH STATUS cn=CN" (never
a token or a secret)."""
import argparse, json, os, re, secrets, ssl, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from cryptography import x509
from cryptography.hazmat.primitives import serialization

lock = threading.Lock()
policies = {}        # name -> [(path glob, set of capabilities)]
certs = {}           # name -> {"cert": x509, "policies": [...], "ttl": s, "display_name": ..}
tokens = {}          # token -> {"policies", "expires", "ttl", "accessor", "name"}
secrets_kv = {}      # path (without "secret/") -> data dict
ROOT = None
STATE = None


def save():
    st = {"root": ROOT, "policies": {k: [(g, sorted(c)) for g, c in v] for k, v in policies.items()},
          "certs": {k: {"cert": v["cert"].public_bytes(serialization.Encoding.PEM).decode(),
                        "policies": v["policies"], "ttl": v["ttl"]} for k, v in certs.items()},
          "tokens": tokens, "secrets": secrets_kv}
    with open(STATE + ".tmp", "w") as f:
        json.dump(st, f)
    os.rename(STATE + ".tmp", STATE)


def load():
    global ROOT
    if not os.path.exists(STATE):
        ROOT = "hvs." + secrets.token_urlsafe(24)
        return
    st = json.load(open(STATE))
    ROOT = st["root"]
    policies.update({k: [(g, set(c)) for g, c in v] for k, v in st["policies"].items()})
    for k, v in st["certs"].items():
        certs[k] = {"cert": x509.load_pem_x509_certificate(v["cert"].encode()), "policies": v["policies"],
                    "ttl": v["ttl"]}
    tokens.update(st["tokens"])
    secrets_kv.update(st["secrets"])


def parse_ttl(v):
    if v is None or v == "":
        return 32 * 24 * 3600
    if isinstance(v, int):
        return v
    m = re.fullmatch(r"(\d+)([smhd]?)", str(v))
    if not m:
        raise ValueError("bad ttl %r" % v)
    return int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def parse_policy(text):
    rules = []
    for m in re.finditer(r'path\s+"([^"]+)"\s*\{([^}]*)\}', text):
        caps = re.search(r'capabilities\s*=\s*\[([^\]]*)\]', m.group(2))
        capset = set(re.findall(r'"([^"]+)"', caps.group(1))) if caps else set()
        rules.append((m.group(1).lstrip("/"), capset))
    return rules


def allowed(tok, path, cap):
    if tok == "root":
        return True
    for name in tok["policies"]:
        for glob, caps in policies.get(name, []):
            if (path == glob or (glob.endswith("*") and path.startswith(glob[:-1]))) and (cap in caps or "sudo" in caps):
                return True
    return False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def cn(self):
        der = self.connection.getpeercert(binary_form=True)
        if not der:
            return None, None
        c = x509.load_der_x509_certificate(der)
        names = c.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
        return c, names[0].value if names else ""

    def reply(self, status, obj=None):
        body = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        _, cn = self.cn()
        print("vault: %s %s %d cn=%s" % (self.command, self.path, status, cn), file=sys.stderr, flush=True)

    def error(self, status, *errs):
        self.reply(status, {"errors": list(errs)})

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return None

    def token(self):
        t = self.headers.get("X-Vault-Token")
        if not t:
            return None
        if t == ROOT:
            return "root"
        tok = tokens.get(t)
        if tok and tok["expires"] < time.time():
            del tokens[t]
            return None
        return tok

    def auth_reply(self, t, tok):
        return {"request_id": secrets.token_hex(8), "lease_id": "", "renewable": False, "lease_duration": 0,
                "data": None, "wrap_info": None, "warnings": None,
                "auth": {"client_token": t, "accessor": tok["accessor"], "policies": ["default"] + tok["policies"],
                         "token_policies": ["default"] + tok["policies"], "metadata": {"cert_name": tok["name"]},
                         "lease_duration": tok["ttl"], "renewable": True, "entity_id": "", "token_type": "service",
                         "orphan": True}}

    def route(self):
        try:
            self.route_locked()
        finally:
            with lock:
                save()

    def route_locked(self):
        body = self.body() if self.command in ("POST", "PUT") else {}
        if body is None:
            return self.error(400, "failed to parse JSON input")
        path = self.path.split("?")[0]
        with lock:
            if path == "/v1/sys/health":
                return self.reply(200, {"initialized": True, "sealed": False, "standby": False})
            if path == "/v1/auth/cert/login" and self.command in ("POST", "PUT"):
                c, cn = self.cn()
                if c is None:
                    return self.error(400, "client certificate must be supplied")
                for name, e in certs.items():
                    reg = e["cert"]
                    ok = reg == c
                    if not ok and reg.subject == c.issuer:
                        try:
                            c.verify_directly_issued_by(reg)
                            ok = True
                        except Exception:
                            ok = False
                    if ok:
                        t = "hvs." + secrets.token_urlsafe(24)
                        tokens[t] = {"policies": e["policies"], "ttl": e["ttl"], "expires": time.time() + e["ttl"],
                                     "accessor": secrets.token_urlsafe(12), "name": name}
                        return self.reply(200, self.auth_reply(t, tokens[t]))
                return self.error(400, "invalid certificate or no client certificate supplied")
            tok = self.token()
            if tok is None:
                return self.error(403, "permission denied")
            if path == "/v1/auth/token/renew-self" and self.command in ("POST", "PUT"):
                if tok == "root":
                    return self.error(400, "root token is not renewable")
                t = self.headers.get("X-Vault-Token")
                tok["expires"] = time.time() + tok["ttl"]
                return self.reply(200, self.auth_reply(t, tok))
            if path == "/v1/auth/token/accessors" and (self.command == "LIST" or "list=true" in self.path):
                if tok != "root":
                    return self.error(403, "permission denied")
                return self.reply(200, {"data": {"keys": [t["accessor"] for t in tokens.values()]}})
            if path == "/v1/auth/token/revoke-accessor" and self.command in ("POST", "PUT"):
                if tok != "root":
                    return self.error(403, "permission denied")
                for t in [t for t, v in tokens.items() if v["accessor"] == body.get("accessor")]:
                    del tokens[t]
                return self.reply(204)
            if path == "/v1/auth/token/revoke" and self.command in ("POST", "PUT"):
                if tok != "root":
                    return self.error(403, "permission denied")
                tokens.pop(body.get("token", ""), None)
                return self.reply(204)
            if path.startswith("/v1/sys/policy/") and self.command in ("POST", "PUT"):
                if tok != "root":
                    return self.error(403, "permission denied")
                policies[path[len("/v1/sys/policy/"):]] = parse_policy(body.get("policy", ""))
                return self.reply(204)
            if path.startswith("/v1/auth/cert/certs/") and self.command in ("POST", "PUT"):
                if tok != "root":
                    return self.error(403, "permission denied")
                pol = body.get("token_policies", body.get("policies", []))
                if isinstance(pol, str):
                    pol = [p for p in pol.split(",") if p]
                try:
                    cert = x509.load_pem_x509_certificate(body["certificate"].encode())
                    ttl = parse_ttl(body.get("token_ttl", body.get("ttl")))
                except (KeyError, ValueError) as ex:
                    return self.error(400, "bad certificate entry: %s" % ex)
                certs[path[len("/v1/auth/cert/certs/"):]] = {"cert": cert, "policies": pol, "ttl": ttl}
                return self.reply(204)
            if path.startswith("/v1/secret/"):
                sp = path[len("/v1/"):]
                key = path[len("/v1/secret/"):]
                if self.command == "GET":
                    if not allowed(tok, sp, "read"):
                        return self.error(403, "1 error occurred:\n\t* permission denied\n\n")
                    if key not in secrets_kv:
                        return self.error(404)
                    return self.reply(200, {"request_id": secrets.token_hex(8), "lease_id": "", "renewable": False,
                                            "lease_duration": 2764800, "data": secrets_kv[key], "wrap_info": None,
                                            "warnings": None, "auth": None})
                if self.command in ("POST", "PUT"):
                    if not allowed(tok, sp, "update" if key in secrets_kv else "create"):
                        return self.error(403, "1 error occurred:\n\t* permission denied\n\n")
                    secrets_kv[key] = body
                    return self.reply(204)
                if self.command == "DELETE":
                    if not allowed(tok, sp, "delete"):
                        return self.error(403, "1 error occurred:\n\t* permission denied\n\n")
                    secrets_kv.pop(key, None)
                    return self.reply(204)
            return self.error(404, "unsupported path")

    do_GET = do_POST = do_PUT = do_DELETE = do_LIST = route


def main():
    global STATE
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--client-ca", required=True)
    ap.add_argument("--root-token-file", required=True)
    ap.add_argument("--state", required=True)
    a = ap.parse_args()
    STATE = a.state
    load()
    save()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    ctx.load_verify_locations(a.client_ca)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(a.root_token_file + ".tmp", "w") as f:
        f.write(ROOT)
    os.rename(a.root_token_file + ".tmp", a.root_token_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
