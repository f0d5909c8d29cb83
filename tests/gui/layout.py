"""The --layout dump with its declared schema (app/probe.cpp): every key a test reads is checked
against the schema the dump carries, so a misspelt key fails instead of reading empty.

    lay = load_layout(path)
    lay["rects"]["stage"]                    # a declared key: its value (KeyError when not drawn)
    lay["strings"].get("stage.message", "")  # a declared key that may be absent this frame
    lay["rects"]["stgae"]                    # LayoutKeyError: 'stgae' is not declared
    [t for t in lay["texts"] if t["group"] == "bars.names"]   # groups are checked too

A dump whose app wrote an undeclared key fails to load (the schema must name everything drawn)."""
import json
import re


class LayoutKeyError(KeyError):
    pass


def _regex(pattern):
    """A schema pattern as a regex: <what> is any non-empty text, {a|b} one of the words."""
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "<":
            j = pattern.index(">", i)
            out += ".+"
            i = j + 1
        elif c == "{":
            j = pattern.index("}", i)
            out += "(?:" + "|".join(re.escape(w) for w in pattern[i + 1:j].split("|")) + ")"
            i = j + 1
        else:
            out += re.escape(c)
            i += 1
    return re.compile(out + r"\Z")


def _literals(pattern):
    """The texts a pattern names up to its first <placeholder> (every {a|b} expanded)."""
    heads = [""]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "<":
            return [(h, True) for h in heads]  # open-ended from here
        if c == "{":
            j = pattern.index("}", i)
            heads = [h + w for h in heads for w in pattern[i + 1:j].split("|")]
            i = j + 1
        else:
            heads = [h + c for h in heads]
            i += 1
    return [(h, False) for h in heads]


class _Schema:
    def __init__(self, patterns, kind):
        self.kind = kind
        self.patterns = patterns
        self.regexes = [_regex(p) for p in patterns]
        self.literals = [lit for p in patterns for lit in _literals(p)]

    def check(self, key):
        if not isinstance(key, str) or not any(r.match(key) for r in self.regexes):
            raise LayoutKeyError(f"layout {self.kind} key {key!r} is not declared in the probe's schema "
                                 f"(app/probe.cpp); declared: {', '.join(self.patterns)}")
        return key

    def check_prefix(self, prefix):
        for text, open_ended in self.literals:
            if text.startswith(prefix) or (open_ended and prefix.startswith(text)):
                return prefix
        raise LayoutKeyError(f"no declared layout {self.kind} starts with {prefix!r}; declared: {', '.join(self.patterns)}")


class Section(dict):
    """rects / numbers / strings: a dict whose every key read must be declared."""

    def __init__(self, values, schema):
        super().__init__(values)
        self.schema = schema

    def __getitem__(self, key):
        return super().__getitem__(self.schema.check(key))

    def get(self, key, default=None):
        return super().get(self.schema.check(key), default)

    def __contains__(self, key):
        return super().__contains__(self.schema.check(key))


class Group(str):
    """A label's group: comparing it or asking for its prefix checks the other side is declared."""
    schema = None

    def __eq__(self, other):
        if isinstance(other, str):
            self.schema.check(other)
        return str.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__

    def startswith(self, prefix, *args):
        if isinstance(prefix, tuple):
            for p in prefix:
                self.schema.check_prefix(p)
        else:
            self.schema.check_prefix(prefix)
        return str.startswith(self, prefix, *args)


class Layout(dict):
    def __init__(self, raw):
        schema = raw.get("schema")
        if not schema:
            raise LayoutKeyError("the layout carries no schema: an app from before the probe schema")
        if raw.get("undeclared"):
            raise LayoutKeyError(f"the app wrote layout keys its schema does not declare: {raw['undeclared']}")
        self.schemas = {k: _Schema(v, k) for k, v in schema.items()}
        group = type("CheckedGroup", (Group,), {"schema": self.schemas["groups"]})
        values = dict(raw)
        for k in ("rects", "numbers", "strings"):
            values[k] = Section(raw.get(k, {}), self.schemas[k])
        values["texts"] = [dict(t, group=group(t["group"])) for t in raw.get("texts", [])]
        super().__init__(values)

    def __getitem__(self, key):
        return super().__getitem__(self.schemas["top"].check(key))

    def get(self, key, default=None):
        return super().get(self.schemas["top"].check(key), default)

    def __contains__(self, key):
        return super().__contains__(self.schemas["top"].check(key))


def load_layout(path):
    with open(path) as f:
        return Layout(json.load(f))
