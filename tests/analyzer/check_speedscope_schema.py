"""Validates `memtrace export --format speedscope` against the file-format schema the pinned `speedscope` npm
package ships (web/package.json; installed into web/node_modules by scripts/bootstrap's `npm ci`), with
python3-jsonschema, for the traces stack_export_traces.h builds and for examples/*.mtrace. Beyond the schema, checks
what speedscope's importer relies on and the schema cannot say: every sample's frame indices name a shared frame,
samples and weights pair up, weights are positive integers summing to endValue. Each trace's `--format folded`
export is checked too: lines of `frame;frame;... BYTES`, no empty frame, one space before the integer.

Without the schema file: a failure where the environment says CI=true (bootstrap installs it there, so its absence is
a broken setup), a skip (exit 77) elsewhere, saying how to install it.
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys

import jsonschema

SKIP = 77  # ctest's SKIP_RETURN_CODE for this test (tests/analyzer/CMakeLists.txt)
FOLDED_LINE = re.compile(r"[^;\n]+(;[^;\n]+)* [0-9]+")


def speedscope_problems(document):
    """What speedscope's importer needs that the schema does not check, one line each."""
    problems = []
    frames = len(document["shared"]["frames"])
    for p, profile in enumerate(document["profiles"]):
        samples, weights = profile["samples"], profile["weights"]
        if len(samples) != len(weights):
            problems.append(f"profile {p}: {len(samples)} samples, {len(weights)} weights")
        for stack in samples:
            if not stack or any(not isinstance(i, int) or not 0 <= i < frames for i in stack):
                problems.append(f"profile {p}: sample {stack} names a frame outside the {frames} shared ones")
        if any(not isinstance(w, int) or w <= 0 for w in weights):
            problems.append(f"profile {p}: a weight that is not a positive integer")
        if profile["startValue"] != 0 or profile["endValue"] != sum(weights):
            problems.append(f"profile {p}: values {profile['startValue']}..{profile['endValue']}, weights sum to "
                            f"{sum(weights)}")
    return problems


def folded_problems(text):
    lines = text.split("\n")
    if lines[-1] != "":
        return ["the last line does not end in a newline"]
    return [f"line {n}: {line!r}" for n, line in enumerate(lines[:-1], 1) if not FOLDED_LINE.fullmatch(line)]


def export(memtrace, fmt, trace, out):
    run = subprocess.run([memtrace, "export", "--format", fmt, str(trace), "-o", str(out)], capture_output=True,
                         text=True)
    if run.returncode != 0:
        raise RuntimeError(f"memtrace export --format {fmt} {trace}: exit {run.returncode}: {run.stderr.strip()}")
    return out.read_text()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--memtrace", required=True)
    parser.add_argument("--trace-writer", required=True, help="write_stack_export_traces")
    parser.add_argument("--schema", required=True, type=pathlib.Path)
    parser.add_argument("--examples", required=True, type=pathlib.Path, help="the folder of examples/*.mtrace")
    parser.add_argument("--out-dir", required=True, type=pathlib.Path)
    args = parser.parse_args()

    if not args.schema.is_file():
        what = f"{args.schema}: no speedscope schema (install the web packages: cd web && npm ci)"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            print(f"check_speedscope_schema: FAIL: {what}; CI=true, where scripts/bootstrap installs them",
                  file=sys.stderr)
            return 1
        print(f"check_speedscope_schema: skipped: {what}")
        return SKIP
    schema = json.loads(args.schema.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)

    built = args.out_dir / "built"
    built.mkdir(parents=True, exist_ok=True)
    subprocess.run([args.trace_writer, str(built)], check=True, stdout=subprocess.DEVNULL)
    traces = sorted(built.glob("*.mtrace")) + sorted(args.examples.glob("*.mtrace"))
    if len(traces) < 4:
        print(f"check_speedscope_schema: FAIL: only {len(traces)} traces found", file=sys.stderr)
        return 1

    failures = 0
    for trace in traces:
        stem = args.out_dir / f"{trace.parent.name}-{trace.stem}"
        document = json.loads(export(args.memtrace, "speedscope", trace, stem.with_suffix(".speedscope.json")))
        problems = [f"schema: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
                    for e in validator.iter_errors(document)]
        if not problems:
            problems = speedscope_problems(document)
        problems += [f"folded: {p}" for p in
                     folded_problems(export(args.memtrace, "folded", trace, stem.with_suffix(".folded")))]
        status = "ok" if not problems else "FAIL"
        print(f"{status}: {trace} ({len(document['profiles'])} profiles, {len(document['shared']['frames'])} frames)")
        for problem in problems[:20]:
            print(f"    {problem}")
        failures += bool(problems)
    print(f"check_speedscope_schema: {len(traces) - failures} of {len(traces)} traces valid")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
