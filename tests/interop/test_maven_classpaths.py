"""The interop harness resolves the classpaths of its Maven projects in one reactor run, caches
them, and names the project Maven could not resolve. Real Maven, on the jars the interop tests
already fetched into ``interop/.m2`` (linked, so nothing is downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.testing import rocketmq as rmq
from conftest import unavailable

REAL_M2 = Path(rmq.__file__).resolve().parents[3] / "interop" / ".m2"

POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>bolide.test</groupId>
  <artifactId>{name}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <properties><bolide.module>{name}</bolide.module></properties>
  <dependencies>
    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version></dependency>
  </dependencies>
</project>
"""


@pytest.fixture
def interop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    missing = rmq.missing_tools()
    if missing:
        unavailable(f"{', '.join(missing)} not found on PATH: the Maven harness needs them")
    fastjson = REAL_M2 / "com" / "alibaba" / "fastjson" / "1.2.83"
    if not fastjson.is_dir():
        unavailable(f"{fastjson} is missing: run make interop-deps first")
    (tmp_path / "rocketmq").mkdir()
    (tmp_path / ".m2").symlink_to(REAL_M2)
    monkeypatch.setenv("BOLIDE_INTEROP_DIR", str(tmp_path))
    return tmp_path


def project(interop: Path, name: str, group: str, artifact: str, version: str) -> None:
    (interop / "rocketmq" / name).mkdir()
    (interop / "rocketmq" / name / "pom.xml").write_text(
        POM.format(name=name, group=group, artifact=artifact, version=version))


def test_projects_resolve_in_one_run_then_come_from_the_cache(interop: Path) -> None:
    project(interop, "a", "com.alibaba", "fastjson", "1.2.83")
    project(interop, "b", "org.apache.commons", "commons-lang3", "3.12.0")
    cps = rmq.classpaths(["a", "b", "a"])
    assert sorted(cps) == ["a", "b"]
    assert [Path(jar).name for jar in cps["a"].split(":")] == ["fastjson-1.2.83.jar"]
    assert [Path(jar).name for jar in cps["b"].split(":")] == ["commons-lang3-3.12.0.jar"]
    reactor = (interop / ".cache" / "maven" / "pom.xml").read_text()
    assert "<module>../../rocketmq/a</module>" in reactor and "<module>../../rocketmq/b</module>" in reactor
    cached = {name: (interop / ".cache" / f"rocketmq-{name}.classpath").stat().st_mtime_ns
              for name in ("a", "b")}
    assert sorted(p.name for p in (interop / ".cache").glob("rocketmq-*")) == [
        "rocketmq-a.classpath", "rocketmq-b.classpath"]  # nothing else left behind

    assert rmq.classpath("b") == cps["b"]  # from the cache: the file was not written again
    assert {name: (interop / ".cache" / f"rocketmq-{name}.classpath").stat().st_mtime_ns
            for name in ("a", "b")} == cached


def test_a_project_maven_cannot_read_is_named(interop: Path) -> None:
    project(interop, "good", "com.alibaba", "fastjson", "1.2.83")
    (interop / "rocketmq" / "bad").mkdir()
    bad_pom = interop / "rocketmq" / "bad" / "pom.xml"
    bad_pom.write_text("<project><modelVersion>4.0.0</modelVersion>")  # cut short
    with pytest.raises(rmq.RocketMQUnavailable, match="Maven could not resolve") as err:
        rmq.classpaths(["good", "bad"])
    assert "bad" in str(err.value).splitlines()[0]
    assert "$ mvn " in str(err.value) and str(bad_pom) in str(err.value)  # the command, Maven's words
    assert not list((interop / ".cache").glob("rocketmq-*.classpath*"))


def test_an_unknown_project_is_refused(interop: Path) -> None:
    with pytest.raises(ValueError, match="no Maven project for RocketMQ nope"):
        rmq.classpaths(["nope"])
