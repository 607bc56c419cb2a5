"""pytest plugin of scripts/e2b-sdk-suite.sh: E2B's own SDK tests against msb.

Nouns:
- the target: msb's E2B listener (MSB_E2B_SUITE_TARGET, host:port). The plugin
  puts a byte-counting TCP relay in front of it, on loopback, so it knows
  which tests reached msb, and points the SDK at the relay.
- the domain (MSB_E2B_SUITE_DOMAIN, under .localhost, which nss-myhostname
  resolves to loopback): when set, the target speaks TLS with a certificate
  for *.<domain> (SSL_CERT_FILE trusts its CA) and the SDK is given nothing
  but E2B_DOMAIN=<domain>:<relay's port>, as on E2B's cloud: it finds the API
  at https://api.<domain>:<port>, envd and the sandboxes' ports at
  https://<port>-<id>.<domain>:<port> (get_host), all by name through the
  system's resolver. Unset: E2B_API_URL and E2B_SANDBOX_URL at the relay.
- a test against msb: one that exchanged bytes with msb while it ran (setup
  and teardown included). The others test the SDK alone (mocks, fake servers
  of their own, argument checks); they are counted apart, as they say nothing
  about msb.
- a CI-environment test: one that assumes E2B's CI environment (an API key
  and a domain, no URL overrides): the files outside the sandbox, template,
  api and git folders, and the tests that ask for the fixtures the suite
  gives tests that do not hit the API (test_api_key, mock_template_build).
  They run without the variables that point the SDK at msb.
- an unsupported test: one that exercises a feature E2B's cloud has and msb's
  E2B front end does not; scripts/e2b-sdk-suite.reasons (MSB_E2B_SUITE_REASONS)
  names each group of them (a pattern over node ids) with why. They are
  skipped with that reason, so the junit XML and the summary carry it.

At the end it prints the reason of every test that did not pass and the counts,
and writes the ids of the tests against msb to MSB_E2B_SUITE_REACHED, if set.
"""

import fnmatch
import os
import socket
import threading

import pytest

UNSUPPORTED = "unsupported on msb: "

CI_ENV_PATHS = ("tests/test_", "tests/shared/api/", "tests/shared/sandbox/", "tests/shared/template/")
CI_ENV_FIXTURES = {"test_api_key", "mock_template_build"}


class Records:
    """Counts the bytes of one direction of a TLS connection but for its
    alerts: a close_notify is what a pooled connection of an earlier test
    sends when it closes, which does not make the test running then one
    against msb. An alert is a record of type 21 (TLS 1.2) or, encrypted in
    TLS 1.3, of type 23 and 19 bytes (2 of alert, 1 of type, 16 of AEAD
    tag: no HTTP/1 or HTTP/2 data is so short)."""

    def __init__(self):
        self.head = b""
        self.left = 0  # bytes of the current record still to come
        self.counts = False

    def counted(self, data):
        n, i = 0, 0
        while i < len(data):
            if self.left == 0:
                take = min(5 - len(self.head), len(data) - i)
                self.head += data[i:i + take]
                i += take
                if len(self.head) < 5:
                    break
                kind, self.left = self.head[0], int.from_bytes(self.head[3:5], "big")
                self.counts = not (kind == 21 or (kind == 23 and self.left == 19))
                n += 5 if self.counts else 0
                self.head = b""
                continue
            take = min(self.left, len(data) - i)
            n += take if self.counts else 0
            self.left -= take
            i += take
        return n


class Relay:
    """A TCP relay from a loopback port to the target that counts the bytes
    it carries either way; with tls, those the client sends in TLS records
    but alerts: over TLS the server sends bytes of its own on a connection
    an earlier test left in the pool (HTTP/2's GOAWAY when it closes an
    idle one), which a test running then did not ask for."""

    def __init__(self, target, tls=False):
        self.tls = tls
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.mu = threading.Lock()
        self.bytes = 0
        listener = socket.create_server(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        # A name under .localhost resolves to ::1 as well (first): the same
        # port there, where the host has IPv6 loopback.
        try:
            listener6 = socket.create_server(("::1", self.port), family=socket.AF_INET6)
        except OSError:
            pass
        else:
            threading.Thread(target=self._accept, args=(listener6,), daemon=True).start()

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            for a, b, up in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._copy, args=(a, b, up), daemon=True).start()

    def _copy(self, src, dst, up):
        records = Records() if self.tls else None
        try:
            while data := src.recv(65536):
                n = len(data)
                if records:
                    n = records.counted(data) if up else 0
                with self.mu:
                    self.bytes += n
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
                try:
                    s.shutdown(how)
                except OSError:
                    pass

    def count(self):
        with self.mu:
            return self.bytes


_relay = None
_reached = set()  # node ids of the tests against msb
_ci_env_ids = set()


def pytest_configure(config):
    global _relay
    target = os.environ.get("MSB_E2B_SUITE_TARGET")
    if target:
        domain = os.environ.get("MSB_E2B_SUITE_DOMAIN")
        _relay = Relay(target, tls=bool(domain))
        if domain:
            os.environ["E2B_DOMAIN"] = "%s:%d" % (domain, _relay.port)
            os.environ.pop("E2B_API_URL", None)
            os.environ.pop("E2B_SANDBOX_URL", None)
        else:
            os.environ["E2B_API_URL"] = os.environ["E2B_SANDBOX_URL"] = _relay.url


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _relay.count() if _relay else 0
    yield
    if _relay and _relay.count() > before:
        _reached.add(item.nodeid)


def _ci_env(nodeid):
    return nodeid in _ci_env_ids or nodeid.startswith(CI_ENV_PATHS)


@pytest.fixture(autouse=True)
def _msb_env(request, monkeypatch):
    if _ci_env(request.node.nodeid):
        for name in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_DOMAIN"):
            monkeypatch.delenv(name, raising=False)


def _rules(path):
    """The (pattern, reason) lines of the reason file, in order."""
    rules = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            pattern, _, reason = line.partition(" ")
            reason = reason.strip()
            if not reason:
                raise pytest.UsageError(f"{path}:{n}: {pattern} has no reason")
            rules.append((pattern, reason))
    return rules


def pytest_collection_modifyitems(config, items):
    for item in items:
        if CI_ENV_FIXTURES & set(getattr(item, "fixturenames", ())):
            _ci_env_ids.add(item.nodeid)
    path = os.environ.get("MSB_E2B_SUITE_REASONS")
    if not path:
        return
    rules = _rules(path)
    used = set()
    for item in items:
        for pattern, reason in rules:
            if fnmatch.fnmatchcase(item.nodeid, pattern):
                item.add_marker(pytest.mark.skip(reason=UNSUPPORTED + reason))
                used.add(pattern)
                break
    # A stale line would make the file claim more than it skips: checked
    # when the script runs the whole suite (-k or file arguments select less).
    if os.environ.get("MSB_E2B_SUITE_WHOLE") == "1":
        stale = [p for p, _ in rules if p not in used]
        if stale:
            raise pytest.UsageError("reason file lines that match no test: " + ", ".join(stale))


def _reason(rep):
    """One line saying why a test was skipped or failed."""
    if rep.skipped and isinstance(rep.longrepr, tuple):
        return rep.longrepr[2].removeprefix("Skipped: ")
    crash = getattr(rep.longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message.splitlines()[0][:300] if crash.message else "?"
    return str(rep.longrepr).strip().splitlines()[-1][:300]


def _outcomes(stats):
    """Each test's outcome, the worst of its phases (a test that passed but
    whose teardown failed is an error), and the files that did not import."""
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    tests, uncollected = {}, []
    for kind in rank:
        for r in stats.get(kind, []):
            if isinstance(r, pytest.CollectReport):  # the file did not import
                uncollected.append(r)
            elif r.nodeid not in tests or rank[kind] > rank[tests[r.nodeid][0]]:
                tests[r.nodeid] = (kind, r)
    return tests, uncollected


def pytest_terminal_summary(terminalreporter):
    tests, uncollected = _outcomes(terminalreporter.stats)
    if path := os.environ.get("MSB_E2B_SUITE_REACHED"):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(n + "\n" for n in sorted(_reached))
    w = terminalreporter.write_line
    w("")
    w("== msb: E2B SDK suite ==")
    groups = {}
    count = {True: dict.fromkeys(("passed", "failed", "error", "skipped"), 0)}
    count[False] = dict(count[True])
    for nodeid, (kind, r) in sorted(tests.items()):
        why = _reason(r)
        if kind == "skipped" and why.startswith(UNSUPPORTED):
            groups[why] = groups.get(why, 0) + 1
            continue
        count[nodeid in _reached][kind] += 1
        if kind != "passed":
            where = "msb" if nodeid in _reached else "sdk"
            w(f"{kind.upper():7} {where} {nodeid}: {why}")
    for r in uncollected:
        w(f"NOIMPORT    {r.nodeid}: {_reason(r)}")
    for why, n in sorted(groups.items()):
        w(f"UNSUPPORTED {n:4} {why.removeprefix(UNSUPPORTED)}")
    for reached, name in ((True, "against msb"), (False, "SDK alone (reached no server)")):
        c = count[reached]
        runnable = c["passed"] + c["failed"] + c["error"]
        pct = 100.0 * c["passed"] / runnable if runnable else 0.0
        w(f"{name}: passed {c['passed']}, failed {c['failed']}, errors {c['error']}, skipped by the test "
          f"{c['skipped']}; {c['passed']}/{runnable} passed ({pct:.1f}%)")
    w(f"unsupported (reason file): {sum(groups.values())}; files the pinned SDK cannot import: {len(uncollected)}")
