#!/usr/bin/python3
"""tools/cpuinfo.py, which names the machine on the benchmarks' last lines: the family/model
numbers of machines this project has run on give the designs the vendors publish for them
(AMD's family 25 model 17 is a Zen 4 EPYC, family 26 a Zen 5; Intel's family 6 model 143
Sapphire Rapids, 207 Emerald Rapids), numbers it has no entry for say "unknown", and this
machine's line carries /proc/cpuinfo's own numbers."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import cpuinfo  # noqa: E402

failures = 0


def check(what, got, want):
    global failures
    ok = got == want
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {got!r}" + ("" if ok else f" (want {want!r})"))


check("AMD 25/17", cpuinfo.design("AuthenticAMD", 25, 17), "Zen 4")
check("AMD 25/97", cpuinfo.design("AuthenticAMD", 25, 97), "Zen 4")
check("AMD 25/1", cpuinfo.design("AuthenticAMD", 25, 1), "Zen 3")
check("AMD 26/2", cpuinfo.design("AuthenticAMD", 26, 2), "Zen 5")
check("AMD 23/49", cpuinfo.design("AuthenticAMD", 23, 49), "Zen 2")
check("Intel 6/143", cpuinfo.design("GenuineIntel", 6, 143), "Sapphire Rapids")
check("Intel 6/207", cpuinfo.design("GenuineIntel", 6, 207), "Emerald Rapids")
check("Intel 6/85", cpuinfo.design("GenuineIntel", 6, 85), "Skylake-SP / Cascade Lake / Cooper Lake")
check("unknown family", cpuinfo.design("AuthenticAMD", 99, 1), "unknown")
check("unknown model", cpuinfo.design("GenuineIntel", 6, 1), "unknown")
check("unknown vendor", cpuinfo.design("HygonGenuine", 24, 0), "unknown")

# this machine's numbers as lscpu reads them (cpuid, not the tool's /proc/cpuinfo parsing)
import subprocess  # noqa: E402
lscpu = dict(line.split(":", 1) for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
             if ":" in line)
lscpu = {k.strip(): v.strip() for k, v in lscpu.items()}
line = cpuinfo.describe()
print(line)
numbers = all(k in lscpu for k in ("CPU family", "Model", "Stepping"))
if numbers:
    want = f"family {lscpu['CPU family']} model {lscpu['Model']} stepping {lscpu['Stepping']}"
    check("this machine's numbers on its line", want in line, True)
    check("its AVX-512 as lscpu's flags say", "; AVX-512)" in line, "avx512f" in lscpu.get("Flags", "").split())
print(f"{11 + 2 * numbers - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
