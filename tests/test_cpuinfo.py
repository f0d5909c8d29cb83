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

fields = {}
with open("/proc/cpuinfo") as f:
    for line in f:
        if not line.strip():
            break
        k, _, v = line.partition(":")
        fields[k.strip()] = v.strip()
line = cpuinfo.describe()
print(line)
if "cpu family" in fields:
    want = f"family {fields['cpu family']} model {fields['model']} stepping {fields.get('stepping', '?')}"
    check("this machine's numbers on its line", want in line, True)
    check("its AVX-512 as /proc/cpuinfo says", "; AVX-512)" in line, "avx512f" in fields.get("flags", "").split())
print(f"{11 + 2 * ('cpu family' in fields) - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
