"""Validates `memtrace ... --json` output against docs/schema/memtrace.schema.json, the JSON contract.

Shared by e2e_lib.Case.analyze() (every e2e check's `memtrace CMD TRACE --json`) and check_json_schema.py.
Uses python3-jsonschema (Debian's 4.10 or later): draft 2020-12, with unevaluatedProperties and if/then.
"""
import json

import jsonschema

# The document shapes of the schema's $defs, by the command that prints them.
SHAPES = ("summary", "leaks", "oom", "timeline", "timeline_combined", "diff", "peak", "fleet")


class Contract:
    def __init__(self, schema_path):
        """schema_path: docs/schema/memtrace.schema.json. Raises if the schema itself is not valid 2020-12."""
        with open(schema_path) as f:
            self.schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(self.schema)
        self.validators = {}
        for shape in SHAPES:
            # The shape's $def as the root, with the $defs it refers to beside it.
            sub = {"$schema": self.schema["$schema"], "$defs": self.schema["$defs"], "$ref": f"#/$defs/{shape}"}
            self.validators[shape] = jsonschema.Draft202012Validator(sub)
        self.any_shape = jsonschema.Draft202012Validator(self.schema)

    def violations(self, document, shape=None):
        """Every way `document` breaks the contract of `shape` (None: any of them), one line each; [] when
        it holds."""
        validator = self.validators[shape] if shape else self.any_shape
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
        return [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in errors]
