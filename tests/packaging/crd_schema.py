"""Checks a Component status against the CRD's own openAPIV3Schema.

    from crd_schema import validate_against_crd_status
    errors = validate_against_crd_status(status_dict)   # [] when valid

The checker is small and written here (no jsonschema dependency) so that any
test can feed it what the operator writes. It implements the subset of
OpenAPI v3 the Component CRD uses, with the API server's meaning:

  type (object, array, string, integer, number, boolean; a bool is not an
  integer, 2.0 is not an integer), enum, required, properties, items,
  pattern (RE2-style: "$" is the end of the text, no trailing newline),
  minLength / maxLength (in characters), minimum / maximum,
  format date-time (RFC 3339, as metav1.Time writes it), int32 / int64 ranges,
  x-kubernetes-list-type map (the map keys are unique).

A field the schema does not declare is an error too: the API server would
prune it silently (structural schema), so the operator's write would be lost.

Every error is one line "<path>: <what is wrong>", e.g.
"status.conditions[0].reason: 'bad reason' does not match ^[A-Za-z]...".
The CRD is read from crds/components.gibson.zeroroot.ai.yaml of this checkout
(IG_SOURCE_DIR, when set, names the checkout instead).
"""

import datetime
import os
import re

import yaml

_HERE = os.path.dirname(os.path.abspath(__file__))
CRD_FILE = "components.gibson.zeroroot.ai.yaml"

_INT_RANGES = {"int32": (-(2 ** 31), 2 ** 31 - 1), "int64": (-(2 ** 63), 2 ** 63 - 1)}

# RFC 3339 date-time (the API server's strfmt also takes a space or lower-case
# t and z; metav1.Time always writes "2006-01-02T15:04:05Z").
_DATE_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z")


def source_dir():
    return os.environ.get("IG_SOURCE_DIR") or os.path.abspath(os.path.join(_HERE, "..", ".."))


def load_crd(path=None):
    path = path or os.path.join(source_dir(), "crds", CRD_FILE)
    with open(path) as f:
        return yaml.safe_load(f)


def crd_schema(crd=None):
    """The openAPIV3Schema of the CRD's storage version."""
    crd = crd or load_crd()
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    return version["schema"]["openAPIV3Schema"]


def status_schema(crd=None):
    return crd_schema(crd)["properties"]["status"]


def _type_ok(value, type_name):
    if type_name == "object":
        return isinstance(value, dict)
    if type_name == "array":
        return isinstance(value, list)
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    raise ValueError("schema type %r is not supported by this checker" % (type_name,))


def _compile(pattern):
    # RE2 (the API server) and Python agree on the patterns the CRD uses,
    # except that Python's "$" also matches before a final newline.
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _date_time_ok(text):
    m = _DATE_TIME.match(text)
    if not m:
        return False
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    try:
        datetime.datetime(year, month, day, hour, minute, min(second, 59))
    except ValueError:
        return False
    return second <= 60  # a leap second is valid RFC 3339


def validate(value, schema, path="status"):
    """Errors of `value` against the OpenAPI v3 `schema`, each "<path>: <why>"."""
    errors = []
    type_name = schema.get("type")
    if type_name is not None and not _type_ok(value, type_name):
        errors.append("%s: %r is not of type %s" % (path, value, type_name))
        return errors

    if "enum" in schema and value not in schema["enum"]:
        errors.append("%s: %r is not one of %r" % (path, value, schema["enum"]))

    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append("%s: longer than %d characters (%d)" % (path, schema["maxLength"], len(value)))
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append("%s: shorter than %d characters (%d)" % (path, schema["minLength"], len(value)))
        if "pattern" in schema and not _compile(schema["pattern"]).search(value):
            errors.append("%s: %r does not match %s" % (path, value, schema["pattern"]))
        if schema.get("format") == "date-time" and not _date_time_ok(value):
            errors.append("%s: %r is not an RFC 3339 date-time" % (path, value))

    if type_name in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append("%s: %r is less than the minimum %r" % (path, value, schema["minimum"]))
        if "maximum" in schema and value > schema["maximum"]:
            errors.append("%s: %r is more than the maximum %r" % (path, value, schema["maximum"]))
        bounds = _INT_RANGES.get(schema.get("format"))
        if bounds and not bounds[0] <= value <= bounds[1]:
            errors.append("%s: %r is out of the %s range" % (path, value, schema["format"]))

    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errors.append("%s: required field %s is missing" % (path, name))
        for name, sub in value.items():
            if name in properties:
                errors.extend(validate(sub, properties[name], "%s.%s" % (path, name)))
            elif "additionalProperties" in schema and isinstance(schema["additionalProperties"], dict):
                errors.extend(validate(sub, schema["additionalProperties"], "%s.%s" % (path, name)))
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append("%s.%s: unknown field (the API server would prune it)" % (path, name))

    if isinstance(value, list):
        items = schema.get("items")
        if items is not None:
            for i, item in enumerate(value):
                errors.extend(validate(item, items, "%s[%d]" % (path, i)))
        if schema.get("x-kubernetes-list-type") == "map":
            keys = schema.get("x-kubernetes-list-map-keys", [])
            seen = {}
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    continue
                key = tuple(item.get(k) for k in keys)
                if key in seen:
                    errors.append("%s[%d]: duplicate entry for %s (as %s[%d])" % (
                        path, i, ", ".join("%s=%r" % kv for kv in zip(keys, key)), path, seen[key]))
                else:
                    seen[key] = i
    return errors


def validate_against_crd_status(status: dict) -> list:
    """Errors of a Component's .status against the CRD in crds/ ([] when valid)."""
    return validate(status, status_schema(), "status")
