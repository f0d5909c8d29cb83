"""Which machine a benchmark ran on, for its last lines.

lscpu's "Model name" alone does not say it: a cloud guest's AMD EPYC reads "AMD EPYC" on a Zen 4
(family 25) and on a Zen 5 (family 26), whose fp32 GEMM peaks differ ~2x at the same core count.
So the line also gives /proc/cpuinfo's family, model and stepping, the core design they name
(from the vendors' published family/model numbers; "unknown" where this table has none, never a
guess), and whether the CPU has AVX-512.

    describe() -> 'AMD EPYC (AuthenticAMD family 26 model 2 stepping 1: Zen 5; AVX-512)'
"""
import subprocess

# (vendor, family): [(first model, last model, name)], from AMD's and Intel's family/model lists.
_DESIGNS = {
    ("AuthenticAMD", 23): [(0x00, 0x2F, "Zen / Zen+"), (0x30, 0xAF, "Zen 2")],
    ("AuthenticAMD", 25): [(0x00, 0x0F, "Zen 3"), (0x10, 0x1F, "Zen 4"), (0x20, 0x5F, "Zen 3"),
                           (0x60, 0x7F, "Zen 4"), (0xA0, 0xAF, "Zen 4")],
    ("AuthenticAMD", 26): [(0x00, 0x4F, "Zen 5")],
    ("GenuineIntel", 6): [(0x55, 0x55, "Skylake-SP / Cascade Lake / Cooper Lake"), (0x6A, 0x6C, "Ice Lake-SP"),
                          (0x7D, 0x7E, "Ice Lake (client)"), (0x8C, 0x8D, "Tiger Lake"),
                          (0x8F, 0x8F, "Sapphire Rapids"), (0x97, 0x9A, "Alder Lake"),
                          (0xAD, 0xAE, "Granite Rapids"), (0xB7, 0xB7, "Raptor Lake"),
                          (0xBA, 0xBA, "Raptor Lake"), (0xBF, 0xBF, "Raptor Lake"),
                          (0xCF, 0xCF, "Emerald Rapids")],
}


def design(vendor, family, model):
    for lo, hi, name in _DESIGNS.get((vendor, family), []):
        if lo <= model <= hi:
            return name
    return "unknown"


def _cpuinfo():
    """The first processor's fields of /proc/cpuinfo."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                k, _, v = line.partition(":")
                fields[k.strip()] = v.strip()
    except OSError:
        pass
    return fields


def model_name():
    try:
        r = subprocess.run(["lscpu"], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _cpuinfo().get("model name", "?")


def describe():
    f = _cpuinfo()
    name = model_name()
    try:
        vendor, family, model = f["vendor_id"], int(f["cpu family"]), int(f["model"])
    except (KeyError, ValueError):
        return name
    flags = f.get("flags", "").split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2, no AVX-512" if "avx2" in flags else "no AVX2"
    return (f"{name} ({vendor} family {family} model {model} stepping {f.get('stepping', '?')}: "
            f"{design(vendor, family, model)}; {isa})")


if __name__ == "__main__":
    print(describe())
