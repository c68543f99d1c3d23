"""Real Apache RocketMQ servers next to Bolide, for interop tests.

The jars come from Maven Central through the small pom-packaged projects in
``interop/rocketmq/<version>/``; their runtime classpath is built once with
``maven-dependency-plugin:build-classpath`` into ``interop/.cache``, all those missing in one
Maven run (Maven's local repository is ``interop/.m2``; both are git-ignored).
``python -m bolide.testing.rocketmq prepare`` does that ahead of the tests (``make interop-deps``).

    with RocketMQ("4.9.7", tmp_path / "rmq") as rmq:
        rmq.start_namesrv()
        rmq.start_broker(store_dir)                # waits for "The broker[...] boot success"
        print(rmq.mqadmin("topicStatus", "-t", "TopicTest"))
    # leaving the block stops the broker (SIGTERM, then SIGKILL) and then kills the NameServer

4.9.x reads its logback files from ``$ROCKETMQ_HOME/conf`` (``interop/rocketmq/home``); 5.x
uses the files inside its jars. Every process gets its own ``user.home`` under the run
directory, so the server logs land in ``<run>/<role>/logs/rocketmqlogs``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

VERSIONS = ("4.9.7", "5.3.3")
DEFAULT_VERSION = "4.9.7"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
COMMIT_LOG_SIZE = 64 * 1024 * 1024
BOOT_TIMEOUT = 90.0  # seconds; a cold JVM on a busy 2-core machine
STOP_TIMEOUT = 30.0
MQADMIN_TIMEOUT = 180.0
WAKE_CONNECTIONS = 8  # per remoting port held through a broker's clean shutdown (JavaProcess.stop)

NAMESRV_READY = re.compile(r"The Name Server boot success")
BROKER_READY = re.compile(r"The broker\[[^\]]*\] boot success")

NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
BATCH_END = "=== mqadmin-batch end "

_COMMON_JVM = ["-Dtls.server.mode=disabled", "-Djava.net.preferIPv4Stack=true"]
_JDK17_OPENS = [
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
]
_JDK17_OPENS_4 = [*_JDK17_OPENS, "--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED"]
_TOOLS_HINT = ("install a JDK 17 and Maven 3.8+ (Debian: apt-get install openjdk-17-jdk-headless maven) "
               "and make sure java, javac and mvn are on PATH")


class RocketMQUnavailable(RuntimeError):
    """java/javac/mvn are missing, or the RocketMQ jars could not be fetched."""


class RocketMQError(RuntimeError):
    """A RocketMQ process failed to start, stop or answer in time."""


# -- locating and preparing the jars ----------------------------------------------------------
def interop_dir() -> Path:
    """``interop/`` of the source tree (override with ``BOLIDE_INTEROP_DIR``)."""
    env = os.environ.get("BOLIDE_INTEROP_DIR")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[3] / "interop"


def missing_tools() -> list[str]:
    """The command-line tools this module needs that are not on PATH."""
    return [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]


def require_tools() -> None:
    missing = missing_tools()
    if missing:
        raise RocketMQUnavailable(f"{', '.join(missing)} not found on PATH; real-RocketMQ interop "
                                  f"needs them: {_TOOLS_HINT}")
    if not (interop_dir() / "rocketmq").is_dir():
        raise RocketMQUnavailable(f"{interop_dir() / 'rocketmq'} does not exist; run from a source "
                                  "checkout or set BOLIDE_INTEROP_DIR")


@contextlib.contextmanager
def _cache_lock() -> Iterator[Path]:
    """Serialise Maven runs and compiles between concurrent test processes."""
    cache = interop_dir() / ".cache"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield cache
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pom(version: str) -> Path:
    pom = interop_dir() / "rocketmq" / version / "pom.xml"
    if not pom.is_file():
        known = sorted(p.parent.name for p in (interop_dir() / "rocketmq").glob("*/pom.xml"))
        raise ValueError(f"no Maven project for RocketMQ {version} at {pom}; known: {known}")
    return pom


def _classpath_fresh(cp_file: Path, pom: Path) -> str | None:
    if not cp_file.is_file() or cp_file.stat().st_mtime < pom.stat().st_mtime:
        return None
    text = cp_file.read_text().strip()
    if not text or not all(Path(jar).is_file() for jar in text.split(os.pathsep)):
        return None  # the local repository moved or was cleaned
    return text


def classpath(version: str = DEFAULT_VERSION) -> str:
    """The runtime classpath of RocketMQ ``version``'s namesrv + broker + tools.

    Runs Maven the first time (downloads into ``interop/.m2``), then reads the cached file.
    """
    return classpaths([version])[version]


_REACTOR_POM = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by bolide.testing.rocketmq: the projects whose classpath Maven resolves at once. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>bolide.interop</groupId>
  <artifactId>classpaths</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <properties>
    <mdep.skip>true</mdep.skip><!-- this project has no classpath of its own -->
  </properties>
  <modules>
{modules}
  </modules>
</project>
"""


def classpaths(names: Sequence[str]) -> dict[str, str]:
    """The runtime classpath of each project ``interop/rocketmq/<name>/`` (a RocketMQ version,
    ``GRPC_CLIENT``, ``PROXY``), by name.

    Those not cached yet (or whose pom changed) are resolved by one Maven run, a reactor of
    their projects built in parallel threads: their downloads overlap, about half the time of
    one run per project from an empty ``interop/.m2``. Each project's pom names its cached file
    (property ``bolide.module``)."""
    require_tools()
    names = list(dict.fromkeys(names))
    poms = {name: _pom(name) for name in names}
    with _cache_lock() as cache:
        files = {name: cache / f"rocketmq-{name}.classpath" for name in names}
        stale = [name for name in names if _classpath_fresh(files[name], poms[name]) is None]
        if stale:
            _resolve(cache, {name: poms[name] for name in stale})
        return {name: files[name].read_text().strip() for name in names}


def _resolve(cache: Path, poms: Mapping[str, Path]) -> None:
    """Run ``build-classpath`` over ``poms`` in one reactor; each writes
    ``rocketmq-<name>.classpath`` into ``cache``."""
    reactor = cache / "maven"
    reactor.mkdir(exist_ok=True)
    for name in poms:  # what a failed run left is not taken for this one's output
        (cache / f"rocketmq-{name}.classpath.tmp").unlink(missing_ok=True)
    modules = "\n".join(f"    <module>{os.path.relpath(pom.parent, reactor)}</module>"
                        for pom in poms.values())
    (reactor / "pom.xml").write_text(_REACTOR_POM.format(modules=modules))
    cmd = [
        "mvn", "-B", "-ntp", "-q", "-T", str(min(4, len(poms))), "-f", str(reactor / "pom.xml"),
        f"-Dmaven.repo.local={interop_dir() / '.m2'}",
        f"{DEPENDENCY_PLUGIN}:build-classpath",
        f"-Dmdep.outputFile={cache}/rocketmq-${{bolide.module}}.classpath.tmp",
        "-Dmdep.includeScope=runtime",
    ]
    print(f"bolide: fetching the jars of {', '.join(poms)} with Maven (once; cached in "
          f"{interop_dir() / '.m2'})", file=sys.stderr, flush=True)
    # Maven's JVM, like javac's, runs once and briefly: the C1 compiler alone costs less CPU
    env = {**os.environ, "MAVEN_OPTS": " ".join(
        filter(None, [os.environ.get("MAVEN_OPTS"), "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"]))}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False, env=env)
    missing = [name for name in poms if not (cache / f"rocketmq-{name}.classpath.tmp").is_file()]
    if proc.returncode != 0 or missing:
        raise RocketMQUnavailable(
            f"Maven could not resolve {', '.join(missing or poms)} (exit {proc.returncode}):\n"
            f"$ {' '.join(cmd)}\n{proc.stdout[-4000:]}{proc.stderr[-4000:]}"
        )
    for name in poms:
        (cache / f"rocketmq-{name}.classpath.tmp").replace(cache / f"rocketmq-{name}.classpath")


def _version_classes(version: str, cp: str) -> Path:
    """The mqadmin batch runner and the Java client drivers, compiled against ``version`` by one
    javac run (once) into ``interop/.cache/java-<version>``."""
    sources = [interop_dir() / "rocketmq" / "MQAdminBatch.java",
               *(interop_dir() / "java-client" / f"{main}.java" for main in JAVA_DRIVERS)]
    return _compile(sources, f"java-{version}", cp)


# javac's own JVM: a short single run, so the C1 compiler alone (about half the CPU time)
_JAVAC_JVM = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC")


def _compile(sources: Sequence[Path], out_name: str, cp: str) -> Path:
    """javac ``sources`` against ``cp`` into ``interop/.cache/<out_name>`` unless every class
    there is newer than its source."""
    with _cache_lock() as cache:
        out = cache / out_name
        classes = [out / f"{src.stem}.class" for src in sources]
        if all(cls.is_file() and cls.stat().st_mtime >= src.stat().st_mtime
               for cls, src in zip(classes, sources, strict=True)):
            return out
        out.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["javac", *_JAVAC_JVM, "-nowarn", "-d", str(out), "-cp", cp,
                               *map(str, sources)],
                              capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            names = ", ".join(str(src) for src in sources)
            raise RocketMQUnavailable(f"javac failed on {names}:\n{proc.stdout}{proc.stderr}")
        return out


JAVA_CLIENT_MAIN = "BolideClient"
JAVA_SCENARIOS_MAIN = "BolideScenarios"
JAVA_DRIVERS = (JAVA_CLIENT_MAIN, JAVA_SCENARIOS_MAIN)


def java_client_command(version: str = DEFAULT_VERSION, home: Path | None = None,
                        main: str = JAVA_CLIENT_MAIN, jvm_options: Sequence[str] = ()) -> list[str]:
    """The ``java ...`` prefix that runs a driver of ``interop/java-client/`` (the official
    ``rocketmq-client`` of ``version``): ``BolideClient`` (``produce``/``consume``) or
    ``BolideScenarios`` (send modes, retries, orderly, groups, lite pull, query), whose commands
    are described in their sources. Compiles it once into ``interop/.cache``; ``home`` becomes
    ``user.home``, where the client writes ``logs/rocketmqlogs`` and broadcasting offsets;
    ``jvm_options`` go to the JVM (e.g. ``-Dtls.enable=true``)."""
    require_tools()
    cp = classpath(version)
    classes = _version_classes(version, cp)
    cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *_COMMON_JVM,
           "-Drocketmq.client.rebalance.waitInterval=1000", *jvm_options]
    if home is not None:
        cmd.append(f"-Duser.home={home}")
    return [*cmd, "-cp", f"{classes}{os.pathsep}{cp}", main]


GRPC_CLIENT = "grpc-client-5.0.8"  # interop/rocketmq/<this>/pom.xml: rocketmq-client-java
GRPC_CLIENT_MAIN = "BolideGrpcClient"


def grpc_java_client_command(home: Path | None = None) -> list[str]:
    """The ``java ...`` prefix that runs ``interop/java-client/BolideGrpcClient.java``, the
    official RocketMQ 5 Java client over gRPC (``rocketmq-client-java``; commands in its
    source). Fetches and compiles it once; ``home`` becomes ``user.home`` (the client's logs)."""
    require_tools()
    cp = classpath(GRPC_CLIENT)
    source = interop_dir() / "java-client" / f"{GRPC_CLIENT_MAIN}.java"
    classes = _compile([source], f"java-{GRPC_CLIENT}", cp)
    cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           "-Djava.net.preferIPv4Stack=true"]
    if home is not None:
        cmd.append(f"-Duser.home={home}")
    return [*cmd, "-cp", f"{classes}{os.pathsep}{cp}", GRPC_CLIENT_MAIN]


def prepare(versions: Sequence[str] = VERSIONS) -> None:
    """Fetch the jars and compile the mqadmin batch runner and the client drivers for
    ``versions``, the RocketMQ 5 Java client over gRPC, and fetch RocketMQ's proxy."""
    cps = classpaths([*versions, GRPC_CLIENT, PROXY])  # one Maven run for all of them
    for version in versions:
        _version_classes(version, cps[version])
    grpc_java_client_command()


PROXY = "proxy-5.3.3"  # interop/rocketmq/<this>/pom.xml: rocketmq-proxy
PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
PROXY_READY = re.compile(r"rocketmq-proxy startup successfully")


class RocketMQProxy:
    """A real RocketMQ 5.3.3 proxy in cluster mode: the gRPC endpoint of RocketMQ 5 in front of
    the brokers its NameServer knows (it talks to them over remoting), on free loopback ports."""

    def __init__(self, run_dir: Path, namesrv_addr: str, cluster: str = "DefaultCluster",
                 settings: Mapping[str, object] | None = None) -> None:
        """``settings``: more keys of the proxy's ``rmq-proxy.json`` (ProxyConfig)."""
        require_tools()
        self.run_dir = Path(run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.namesrv_addr, self.cluster = namesrv_addr, cluster
        self.settings = dict(settings or {})
        self.grpc_port = free_port()
        self.remoting_port = free_port()
        self.process: JavaProcess | None = None

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self, timeout: float = BOOT_TIMEOUT) -> RocketMQProxy:
        conf = self.run_dir / "rmq-proxy.json"
        conf.write_text(json.dumps({
            "rocketMQClusterName": self.cluster, "namesrvAddr": self.namesrv_addr,
            "grpcServerPort": self.grpc_port, "remotingListenPort": self.remoting_port,
            "proxyMode": "cluster", **self.settings,
        }))
        cmd = ["java", "-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *_COMMON_JVM,
               *_JDK17_OPENS, f"-Duser.home={self.run_dir}", f"-Djava.io.tmpdir={self.run_dir}",
               f"-Drocketmq.home.dir={interop_dir() / 'rocketmq' / 'home'}",
               "-Drmq.logback.configurationFile=rmq.proxy.logback.xml",
               "-cp", classpath(PROXY), PROXY_MAIN, "-pc", str(conf), "-pm", "cluster"]
        env = {k: v for k, v in os.environ.items() if k not in ("NAMESRV_ADDR", "JAVA_TOOL_OPTIONS")}
        env["ROCKETMQ_HOME"] = str(interop_dir() / "rocketmq" / "home")
        started = time.monotonic()
        self.process = JavaProcess("proxy", cmd, self.run_dir / "stdout.log", self.run_dir, env)
        self.process.wait_for_line(PROXY_READY, timeout)
        log.info("RocketMQ proxy up on %s in %.1f s", self.grpc_addr, time.monotonic() - started)
        return self

    def logs(self) -> str:
        """The proxy's own log (``proxy.log``), for failure messages."""
        path = self.run_dir / "logs" / "rocketmqlogs" / "proxy.log"
        return path.read_text(errors="replace")[-6000:] if path.is_file() else ""

    def stop(self) -> None:
        """Kill it: the proxy keeps no state, and its clean shutdown waits about 30 s."""
        if self.process is not None:
            self.process.kill()
            self.process = None

    def __enter__(self) -> RocketMQProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- ports ------------------------------------------------------------------------------------
def _port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(span: Sequence[int] = (0,)) -> int:
    """A loopback port P such that P + d is free for every d in ``span``.

    A broker listening on P also opens P - 2 (the "VIP" server) and P + 1 (HA, on every
    interface), hence ``span=(-2, 0, 1)`` for brokers.
    """
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + min(span) < 1024 or port + max(span) > 65535:
            continue
        if all(_port_free(port + d) and (d != 1 or _port_free(port + d, "0.0.0.0"))
               for d in span):
            return port
    raise RocketMQError("no free loopback port found")


# -- processes --------------------------------------------------------------------------------
# util-linux's setpriv sets the parent-death signal and execs the command: a preexec_fn would
# do the same, but it makes subprocess fork() instead of vfork(), and a fork runs the fork
# handlers of gRPC's core, which crash the child (SIGSEGV / SIGABRT before exec) in a process
# whose gRPC threads are busy, as in a test worker that has served gRPC.
_SETPRIV = shutil.which("setpriv") if sys.platform.startswith("linux") else None


def dying_with_parent(cmd: Sequence[str]) -> list[str]:
    """``cmd`` run so that Linux SIGKILLs it when the thread that started it (the test process)
    dies, so no broker outlives a run; as is where setpriv is missing."""
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *cmd] if _SETPRIV else list(cmd)


class JavaProcess:
    """A JVM whose combined stdout/stderr is copied to a file and watched line by line."""

    def __init__(self, name: str, cmd: list[str], log_path: Path, cwd: Path,
                 env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.cmd = cmd
        self.log_path = log_path
        self._lines: list[str] = []
        self._closed = False
        self._cond = threading.Condition()
        self._log: IO[str] = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by reader
        self.popen = subprocess.Popen(
            dying_with_parent(cmd), cwd=cwd, env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, encoding="utf-8", errors="replace", bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def _read(self) -> None:
        assert self.popen.stdout is not None
        try:
            for line in self.popen.stdout:
                self._log.write(line)
                self._log.flush()
                with self._cond:
                    self._lines.append(line.rstrip("\n"))
                    self._cond.notify_all()
        finally:
            self._log.close()
            with self._cond:
                self._closed = True
                self._cond.notify_all()

    def output(self) -> str:
        with self._cond:
            return "\n".join(self._lines)

    def wait_for_line(self, pattern: re.Pattern[str], timeout: float) -> str:
        """Block until a line of output matches; fail when the process exits or time runs out
        (the process is then killed)."""
        try:
            return self._wait_for_line(pattern, timeout)
        except RocketMQError:
            self.kill()
            raise

    def _wait_for_line(self, pattern: re.Pattern[str], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for line in self._lines[seen:]:
                    if pattern.search(line):
                        return line
                seen = len(self._lines)
                if self._closed:
                    code = self.popen.wait()
                    raise RocketMQError(f"{self.name} exited with code {code} before printing "
                                        f"{pattern.pattern!r}; output:\n{self._tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RocketMQError(f"{self.name} did not print {pattern.pattern!r} within "
                                        f"{timeout:.0f} s; output:\n{self._tail()}")
                self._cond.wait(left)

    def _tail(self, n: int = 40) -> str:
        return "\n".join(self._lines[-n:])

    def stop(self, timeout: float = STOP_TIMEOUT, wake_ports: Sequence[int] = ()) -> int:
        """SIGTERM (the JVM's shutdown hooks run), then SIGKILL after ``timeout`` seconds.

        ``wake_ports``: loopback ports of the process's remoting servers. Each server's Netty
        event thread ends only when its 3 s poll returns, which an event (a connection
        closing) cuts short: connections to these ports, held through the shutdown, are closed
        by the server as it stops, several per port so that the last of their events comes
        after the thread was told to stop."""
        with contextlib.ExitStack() as held:
            for port in wake_ports:
                for _ in range(WAKE_CONNECTIONS):
                    with contextlib.suppress(OSError):
                        held.enter_context(socket.create_connection(("127.0.0.1", port), timeout=1))
            if self.popen.poll() is None:
                self.popen.send_signal(signal.SIGTERM)
                try:
                    self.popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.popen.kill()
                    self.popen.wait()
        self._reader.join(10)
        return self.popen.returncode

    def kill(self) -> int:
        """SIGKILL: no shutdown hook runs (the broker leaves ``abort`` and unflushed pages)."""
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()
        self._reader.join(10)
        return self.popen.returncode

    @property
    def running(self) -> bool:
        return self.popen.poll() is None


@dataclass
class BrokerSettings:
    """What goes into ``broker.conf``; sizes default to the interop tests' store geometry."""

    store_dir: Path
    mapped_file_size_commit_log: int = COMMIT_LOG_SIZE
    mapped_file_size_consume_queue: int = 3000 * 20
    cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    extra: dict[str, str] = field(default_factory=dict)


def acl2_settings(root_user: str, root_password: str) -> dict[str, str]:
    """``broker.conf`` lines (for :attr:`BrokerSettings.extra`) of a RocketMQ 5.3 broker with ACL
    2.0 on: authentication and authorization with its local metadata providers (users and ACLs
    in RocksDB under ``config/``), ``root_user`` its initial super user and inner credentials."""
    providers = "org.apache.rocketmq.auth.{0}.provider.{1}"
    return {
        "authenticationEnabled": "true", "authorizationEnabled": "true",
        "authenticationProvider": providers.format("authentication", "DefaultAuthenticationProvider"),
        "authenticationMetadataProvider": providers.format("authentication",
                                                           "LocalAuthenticationMetadataProvider"),
        "authorizationProvider": providers.format("authorization", "DefaultAuthorizationProvider"),
        "authorizationMetadataProvider": providers.format("authorization",
                                                          "LocalAuthorizationMetadataProvider"),
        "initAuthenticationUser": json.dumps({"username": root_user, "password": root_password}),
        "innerClientAuthenticationCredentials": json.dumps({"accessKey": root_user,
                                                            "secretKey": root_password}),
    }


class RocketMQ:
    """One NameServer and one Broker of a given RocketMQ version, on free loopback ports."""

    def __init__(self, version: str, run_dir: Path, *, broker_port: int | None = None,
                 namesrv_port: int | None = None,
                 tools_account: tuple[str, str] | None = None,
                 server_jvm_options: Sequence[str] = ()) -> None:
        """``namesrv_port``: a NameServer already listening on that loopback port (Bolide's,
        say) that brokers register with; :meth:`start_namesrv` is then not used.
        ``tools_account``: (accessKey, secretKey) that mqadmin signs its requests with, for
        brokers with plain ACL (a ``conf/tools.yml`` in a home of this run's own).
        ``server_jvm_options`` go to the NameServer's and the brokers' JVMs (e.g. TLS
        ``-Dtls.server.mode=enforcing``)."""
        self.version = version
        self.tools_account = tools_account
        self.server_jvm_options = list(server_jvm_options)
        self.major = int(version.split(".")[0])
        self.run_dir = Path(run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.classpath = classpath(version)
        self._batch_dir = _version_classes(version, self.classpath)
        self.external_namesrv = namesrv_port is not None
        self.namesrv_port = free_port() if namesrv_port is None else namesrv_port
        self._auto_broker_port = not broker_port  # free to move when another process takes it
        self.broker_port = broker_port or free_port((-2, 0, 1))
        self.namesrv: JavaProcess | None = None
        self.broker: JavaProcess | None = None
        self.broker_settings: BrokerSettings | None = None
        self.broker_home: Path | None = None
        self._registered = False
        self._starts = 0

    # -- addresses and paths --------------------------------------------------------------
    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def _home(self, role: str) -> Path:
        home = self.run_dir / role
        home.mkdir(parents=True, exist_ok=True)
        return home

    def log_dir(self, role: str) -> Path:
        """Where ``role`` (``namesrv``, ``broker`` = the latest broker start, ``tools``) logs."""
        if role == "broker":
            if self.broker_home is None:
                raise RocketMQError("no broker was started")
            return self.broker_home / "logs" / "rocketmqlogs"
        return self.run_dir / role / "logs" / "rocketmqlogs"

    def rocketmq_home(self) -> Path:
        """4.9.x reads conf/logback_*.xml from here, mqadmin its ACL account from
        conf/tools.yml; 5.x only needs the directory to exist."""
        shared = interop_dir() / "rocketmq" / "home"
        if self.tools_account is None:
            return shared
        home = self.run_dir / "rocketmq-home"
        if not (home / "conf").is_dir():
            shutil.copytree(shared / "conf", home / "conf")
            access_key, secret_key = self.tools_account
            (home / "conf" / "tools.yml").write_text(f"accessKey: {access_key}\n"
                                                     f"secretKey: {secret_key}\n")
        return home

    def _java(self, role: str, heap: list[str], main: str, extra_cp: str = "") -> list[str]:
        cp = f"{extra_cp}{os.pathsep}{self.classpath}" if extra_cp else self.classpath
        kind = role.split("-")[0]  # broker-<n> -> broker
        # java.io.tmpdir: RocksDB unpacks its JNI library there and a killed JVM leaves it behind
        cmd = ["java", *heap, *_COMMON_JVM, f"-Duser.home={self._home(role)}",
               f"-Djava.io.tmpdir={self._home(role)}", f"-Drocketmq.home.dir={self.rocketmq_home()}"]
        if self.major >= 5:
            cmd.append(f"-Drmq.logback.configurationFile=rmq.{kind}.logback.xml")
        if kind == "tools":
            cmd += ["-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8"]
        else:
            cmd += _JDK17_OPENS if self.major >= 5 else _JDK17_OPENS_4
            cmd += self.server_jvm_options
        return [*cmd, "-cp", cp, main]

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("NAMESRV_ADDR", "ROCKETMQ_HOME", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS")}
        env["ROCKETMQ_HOME"] = str(self.rocketmq_home())
        return env

    # -- NameServer ---------------------------------------------------------------------------
    def start_namesrv(self, timeout: float = BOOT_TIMEOUT, extra: Mapping[str, str] | None = None) -> None:
        """Start the NameServer; ``extra``: more ``namesrv.conf`` lines (e.g.
        ``orderMessageEnable``)."""
        home = self._home("namesrv")
        conf = home / "namesrv.conf"
        lines = [f"listenPort={self.namesrv_port}"]
        if self.major >= 5:
            lines.append("bindAddress=127.0.0.1")
        lines += [f"{k}={v}" for k, v in (extra or {}).items()]
        conf.write_text("\n".join(lines) + "\n")
        cmd = self._java("namesrv", ["-Xms64m", "-Xmx256m", "-XX:+UseSerialGC",
                                     "-XX:TieredStopAtLevel=1"], NAMESRV_MAIN)
        started = time.monotonic()
        self.namesrv = JavaProcess("namesrv", [*cmd, "-c", str(conf)], home / "stdout.log", home,
                                   self._env())
        self.namesrv.wait_for_line(NAMESRV_READY, timeout)
        log.info("RocketMQ %s NameServer up on %s in %.1f s", self.version, self.namesrv_addr,
                 time.monotonic() - started)

    # -- Broker -------------------------------------------------------------------------------
    def broker_conf(self, settings: BrokerSettings) -> str:
        store = Path(settings.store_dir).resolve()
        props = {
            "brokerClusterName": settings.cluster_name,
            "brokerName": settings.broker_name,
            "brokerId": "0",
            "brokerRole": "ASYNC_MASTER",
            "flushDiskType": "ASYNC_FLUSH",
            "listenPort": str(self.broker_port),
            "brokerIP1": "127.0.0.1",
            "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": str(store),
            "mappedFileSizeCommitLog": str(settings.mapped_file_size_commit_log),
            "mappedFileSizeConsumeQueue": str(settings.mapped_file_size_consume_queue),
            "maxHashSlotNum": "50000",
            "maxIndexNum": "200000",
            "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true",
        }
        if self.major >= 5:
            props["bindAddress"] = "127.0.0.1"
            # one pop-revive queue instead of 8: a clean shutdown waits for each service in turn
            props["reviveQueueNum"] = "1"
        props.update(settings.extra)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def start_broker(self, store_dir: Path | BrokerSettings, timeout: float = BOOT_TIMEOUT) -> None:
        """Start the broker on ``store_dir`` and wait for its boot line (after registration).

        Each start gets a fresh ``user.home`` (``<run>/broker-<n>``), so :meth:`broker_logs`
        shows only this run's logs; ``broker.conf`` is written there too.
        """
        if not self.external_namesrv and (self.namesrv is None or not self.namesrv.running):
            raise RocketMQError("start the NameServer first")
        if self.broker is not None and self.broker.running:
            raise RocketMQError("the broker is already running")
        settings = store_dir if isinstance(store_dir, BrokerSettings) else BrokerSettings(Path(store_dir))
        self.broker_settings = settings
        for attempt in range(3):
            try:
                self._start_broker(settings, timeout)
                return
            except RocketMQError as exc:
                # a port chosen free at construction (listenPort, its HA port + 1, its VIP
                # port - 2) can be taken by the time the broker starts, e.g. as the local port
                # of another process's connection: choose again
                if not self._auto_broker_port or "Address already in use" not in str(exc) or attempt == 2:
                    raise
                log.warning("RocketMQ broker port %d or a neighbour was taken: choosing another",
                            self.broker_port)
                self.broker_port = free_port((-2, 0, 1))

    def _start_broker(self, settings: BrokerSettings, timeout: float) -> None:
        self._starts += 1
        home = self._home(f"broker-{self._starts}")
        self.broker_home = home
        conf = home / "broker.conf"
        conf.write_text(self.broker_conf(settings))
        cmd = self._java(home.name, ["-Xms256m", "-Xmx1g", "-XX:MaxDirectMemorySize=512m",
                                     "-XX:+UseSerialGC"], BROKER_MAIN)
        self._registered = False
        started = time.monotonic()
        self.broker = JavaProcess("broker", [*cmd, "-c", str(conf)], home / "stdout.log", home,
                                  self._env())
        self.broker.wait_for_line(BROKER_READY, timeout)
        log.info("RocketMQ %s broker up on %s (store %s) in %.1f s", self.version, self.broker_addr,
                 settings.store_dir, time.monotonic() - started)

    @property
    def broker_conf_path(self) -> Path:
        """``broker.conf`` of the latest broker start (``StoreConfig.from_properties`` reads it)."""
        if self.broker_home is None:
            raise RocketMQError("no broker was started")
        return self.broker_home / "broker.conf"

    def store_options(self) -> dict[str, Any]:
        """The store settings of the latest broker start, as keyword arguments of a StoreConfig
        (for a Bolide broker opening that store: its segment sizes and paths)."""
        from bolide.store import StoreConfig

        written = StoreConfig.from_properties(self.broker_conf_path)
        return {f.name: getattr(written, f.name) for f in fields(written)}

    def stop_broker(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """Clean shutdown (SIGTERM): the broker flushes, persists and deletes ``abort``."""
        if self.broker is None:
            return None
        if not self.broker.running:
            return self.broker.stop(timeout)  # already gone: just collect it
        started = time.monotonic()
        code = self.broker.stop(timeout, wake_ports=(self.broker_port, self.broker_port - 2))
        log.info("RocketMQ %s broker stopped (exit %s) in %.1f s", self.version, code,
                 time.monotonic() - started)
        return code

    def kill_broker(self) -> int | None:
        """Unclean shutdown (SIGKILL)."""
        if self.broker is None:
            return None
        return self.broker.kill()

    def stop(self) -> None:
        """Stop the broker first (cleanly), then kill the NameServer.

        A NameServer keeps nothing for its shutdown to save (``kvConfig.json`` is written on
        every change; routes live in memory), and its clean shutdown only idles, up to 3 s per
        Netty event thread."""
        try:
            self.stop_broker()
        finally:
            if self.namesrv is not None:
                self.namesrv.kill()

    def __enter__(self) -> RocketMQ:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def broker_logs(self) -> str:
        """Every broker log file (4.9.x: broker.log; 5.x: broker.log, store.log, ...)."""
        parts = []
        for path in sorted(self.log_dir("broker").glob("*.log")):
            parts.append(f"==> {path.name} <==\n{path.read_text(encoding='utf-8', errors='replace')}")
        return "\n".join(parts)

    # -- mqadmin ------------------------------------------------------------------------------
    def mqadmin_batch(self, commands: Sequence[Sequence[str]], timeout: float = MQADMIN_TIMEOUT,
                      jobs: int = 1) -> list[str]:
        """Run mqadmin sub-commands in one JVM (``MQAdminStartup.main0`` each); their outputs.

        ``-n <namesrv>`` is added to every command that has none. mqadmin prints failures
        and still succeeds, so callers must check the text. The first batch after a broker
        start first waits until the NameServer lists the broker (a 5.x broker can print its
        boot line before its first registration went through). ``jobs > 1`` spreads the
        commands over that many JVMs running at once (a 5.x client often idles 3 s in its
        shutdown, so e.g. many ``sendMessage`` calls go faster side by side).
        """
        lines = []
        for command in commands:
            args = [str(a) for a in command]
            if "-n" not in args:
                args += ["-n", self.namesrv_addr]
            if any("\t" in a or "\n" in a for a in args):
                raise ValueError(f"mqadmin arguments may not hold tabs or newlines: {args!r}")
            if "-h" in args:
                raise ValueError("-h makes mqadmin exit the JVM; use mqadmin_main instead")
            lines.append("\t".join(args))
        if self.broker is not None and self.broker.running and not self._registered:
            wait = f"@waitBroker\t{self.namesrv_addr}\t{self.broker_addr}\t{int(BOOT_TIMEOUT * 1000)}"
            if jobs == 1:
                outputs = self._run_batch([wait, *lines], timeout + BOOT_TIMEOUT)
                self._check_registered(outputs[0])
                return outputs[1:]
            self._check_registered(self._run_batch([wait], BOOT_TIMEOUT + 60)[0])
        if jobs <= 1 or len(lines) <= 1:
            return self._run_batch(lines, timeout)
        size = -(-len(lines) // jobs)
        chunks = [lines[i:i + size] for i in range(0, len(lines), size)]
        with ThreadPoolExecutor(len(chunks)) as pool:
            results = list(pool.map(lambda chunk: self._run_batch(chunk, timeout), chunks))
        return [out for chunk_outputs in results for out in chunk_outputs]

    def _check_registered(self, output: str) -> None:
        if not output.startswith("registered"):
            raise RocketMQError(f"the broker did not register with the NameServer: {output}")
        self._registered = True

    def _run_batch(self, lines: list[str], timeout: float) -> list[str]:
        started = time.monotonic()
        cmd = self._java("tools", ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"],
                         "MQAdminBatch", extra_cp=str(self._batch_dir))
        proc = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True,
                              timeout=timeout, cwd=self._home("tools"), env=self._env(), check=False)
        outputs = [out.strip("\n") for out in
                   re.split(rf"(?m)^{re.escape(BATCH_END)}\d+\s*$\n?", proc.stdout)[:-1]]
        if proc.returncode != 0 or len(outputs) != len(lines):
            raise RocketMQError(f"mqadmin batch failed (exit {proc.returncode}):\n"
                                f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        log.info("mqadmin %s: %s in %.1f s", self.version,
                 ", ".join(sorted({line.split("\t")[0] for line in lines})), time.monotonic() - started)
        return outputs

    def mqadmin(self, *args: str, timeout: float = MQADMIN_TIMEOUT) -> str:
        """Run one mqadmin sub-command, e.g. ``mqadmin("topicStatus", "-t", "T")``."""
        return self.mqadmin_batch([args], timeout)[0]

    def mqadmin_main(self, *args: str, timeout: float = MQADMIN_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """Run ``MQAdminStartup`` itself in its own JVM (slower; for ``-h`` and the like)."""
        cmd = self._java("tools", ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"],
                         MQADMIN_MAIN)
        return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout,
                              cwd=self._home("tools"), env=self._env(), check=False)


# -- topics.json ------------------------------------------------------------------------------
def topics_json(topics: Mapping[str, int], *, rocketmq_5: bool = False, timestamp_ms: int | None = None,
                perm: int = 6, attributes: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """``config/topics.json`` as a broker writes it (fastjson pretty print, tab indents);
    ``attributes``: RocketMQ 5 topic attributes by topic (e.g. ``cleanup.policy``)."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    version: dict[str, int] = {"counter": 1}
    if rocketmq_5:
        version["stateVersion"] = 0
    version["timestamp"] = ts
    table = {}
    for name, queues in topics.items():
        cfg: dict[str, object] = {}
        if rocketmq_5:
            cfg["attributes"] = dict((attributes or {}).get(name, {}))
        cfg.update({"order": False, "perm": perm, "readQueueNums": queues,
                    "topicFilterType": "SINGLE_TAG", "topicName": name, "topicSysFlag": 0,
                    "writeQueueNums": queues})
        table[name] = cfg
    return json.dumps({"dataVersion": version, "topicConfigTable": table}, indent="\t",
                      separators=(",", ":"))


def write_topics_json(store_dir: Path, topics: Mapping[str, int], *, rocketmq_5: bool = False,
                      attributes: Mapping[str, Mapping[str, str]] | None = None) -> Path:
    """Write ``<store>/config/topics.json`` so a broker started on the store knows ``topics``."""
    path = Path(store_dir) / "config" / "topics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(topics_json(topics, rocketmq_5=rocketmq_5, attributes=attributes), encoding="utf-8")
    return path


# -- parsing mqadmin output -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class QueueStatus:
    broker: str
    queue_id: int
    min_offset: int
    max_offset: int


def parse_topic_status(text: str) -> dict[int, QueueStatus]:
    """``topicStatus`` rows by queue id."""
    result = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)(\s|$)", line)
        if m and not line.startswith("#"):
            q = QueueStatus(m[1], int(m[2]), int(m[3]), int(m[4]))
            result[q.queue_id] = q
    return result


@dataclass(frozen=True, slots=True)
class SendResult:
    broker: str
    queue_id: int
    status: str
    msg_id: str


def parse_send_message(text: str) -> SendResult | None:
    """``sendMessage`` result row, or None when the output has none (a failure)."""
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s+(\d+)\s+([A-Z_]+)\s+([0-9A-F]{32})\s*$", line)
        if m:
            return SendResult(m[1], int(m[2]), m[3], m[4])
    return None


@dataclass(frozen=True, slots=True)
class PrintedMessage:
    """One message of ``printMsg -d true`` output (MessageExt.toString + body)."""

    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    store_host: str
    sys_flag: int
    body_crc: int
    properties: dict[str, str]
    body: str

    @property
    def tags(self) -> str | None:
        return self.properties.get("TAGS")

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get("KEYS", "").split(" ") if k]


_PRINTED = re.compile(
    r"^MSGID: (?P<id>\S+) MessageExt \[.*?queueId=(?P<qid>\d+), .*?queueOffset=(?P<qoff>\d+), "
    r"sysFlag=(?P<sys>\d+), .*?storeHost=/?(?P<host>[^,]+), .*?commitLogOffset=(?P<phys>\d+), "
    r"bodyCRC=(?P<crc>-?\d+), .*?Message\{topic='(?P<topic>[^']*)', .*?properties=\{(?P<props>.*?)\}, "
    r"body=.*? BODY: (?P<body>.*)$"
)


def _java_map(text: str) -> dict[str, str]:
    result = {}
    for item in text.split(", ") if text else []:
        key, _, value = item.partition("=")
        result[key] = value
    return result


def parse_print_msg(text: str) -> list[PrintedMessage]:
    """Messages printed by ``printMsg``/``printMsgByQueue`` with ``-d true`` (bodies without
    newlines, property values without ", ")."""
    found = []
    for line in text.splitlines():
        m = _PRINTED.match(line)
        if m:
            found.append(PrintedMessage(
                m["id"], m["topic"], int(m["qid"]), int(m["qoff"]), int(m["phys"]), m["host"],
                int(m["sys"]), int(m["crc"]), _java_map(m["props"]), m["body"],
            ))
    return found


def parse_query_by_key(text: str) -> list[tuple[str, int, int]]:
    """``queryMsgByKey`` rows: (message id, queue id, queue offset)."""
    rows = []
    for line in text.splitlines():
        m = re.match(r"^([0-9A-F]{32})\s+(\d+)\s+(\d+)\s*$", line)
        if m:
            rows.append((m[1], int(m[2]), int(m[3])))
    return rows


# -- command line -----------------------------------------------------------------------------
def prepare_main(argv: Sequence[str] | None, module: str, what: str,
                 install: Callable[[], Iterable[str]]) -> int:
    """``python -m <module> prepare`` of an interop client: ``install()`` it, printing the lines
    it returns. When it raises RocketMQUnavailable, print why and exit 0 (``what`` will be
    skipped), or 1 when ``CI`` is set."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["prepare"]:
        print(f"usage: python -m {module} prepare", file=sys.stderr)
        return 2
    try:
        lines = list(install())
    except RocketMQUnavailable as exc:
        if os.environ.get("CI"):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"warning: {what} will be skipped: {exc}", file=sys.stderr)
        return 0
    for line in lines:
        print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bolide.testing.rocketmq prepare [VERSION...]``: fetch jars ahead of tests and
    build the Go client drivers (``bolide.testing.goclient``).

    Without java/javac/mvn or go this prints why and exits 0, unless ``CI`` is set (then 1).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "prepare":
        print("usage: python -m bolide.testing.rocketmq prepare [VERSION...]", file=sys.stderr)
        return 2
    versions = args[1:] or list(VERSIONS)
    status = 0
    # imported here because goclient imports this module; under ``python -m`` this module is
    # ``__main__``, so the exception goclient raises is the class of ``bolide.testing.rocketmq``
    from bolide.testing import goclient

    # the Go drivers compile (one after the other) while Maven downloads: they share no files
    pool = ThreadPoolExecutor(1, thread_name_prefix="go-build")
    go_builds = [pool.submit(goclient.go_client_binary, name)
                 for name in (goclient.GO_CLIENT, goclient.GO5_CLIENT)]
    pool.shutdown(wait=False)
    try:
        prepare(versions)
    except RocketMQUnavailable as exc:
        if os.environ.get("CI"):
            print(f"error: {exc}", file=sys.stderr)
            status = 1
        else:
            print(f"warning: real-RocketMQ interop tests will be skipped: {exc}", file=sys.stderr)
    else:
        print(f"RocketMQ {', '.join(versions)} ready (classpaths in {interop_dir() / '.cache'})")
    for build in go_builds:
        try:
            binary = build.result()
        except goclient.RocketMQUnavailable as exc:
            if os.environ.get("CI"):
                print(f"error: {exc}", file=sys.stderr)
                return 1
            print(f"warning: the Go client interop tests will be skipped: {exc}", file=sys.stderr)
            return status
        print(f"RocketMQ Go client driver ready ({binary})")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
