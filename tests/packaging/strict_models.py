"""A strict check of Kubernetes objects against Debian's python3-kubernetes models.

    import strict_models
    cls = strict_models.model_class("apps/v1", "Deployment")   # V1Deployment, or None
    errors = strict_models.check(obj)                          # [] when valid

kubernetes.client.models has one class per API type: openapi_types names each
attribute's type ("str", "int", "list[V1Container]", "dict(str, str)",
"V1PodSpec", "object" for free-form and int-or-string fields), attribute_map
its JSON name. check() walks the object along those types and reports every
field the model does not know (the API server would drop it, or reject it with
fieldValidation=Strict), every value of the wrong type, and every required
field that is missing (the models' setters refuse None for those). Every error
is one line "<path>: <what is wrong>", e.g.
"spec.template.spec.containers[0].imagePullPolicyy: unknown field (not in V1Container)".

Only built-in Kubernetes kinds have models. CRDs of cert-manager
(cert-manager.io) and of the Prometheus Operator (monitoring.coreos.com) have
none: model_class() returns None for them and no_model_reason() says so; those
objects are checked by tests/packaging/schema_check.mjs (npm
@kubernetes-models/*) only. Objects of our own CRD (gibson.zeroroot.ai) are
checked against crds/ with crd_schema.py.

The python3-kubernetes in Debian is generated from an older Kubernetes API than
the one the chart targets; a field added since is reported as unknown here,
which is what this check is for: such a field would be silently dropped by an
API server of that age.
"""

import re

from kubernetes import client
from kubernetes.client import models

# Kinds whose class name is not V<version><Kind>.
_CLASS_OVERRIDES = {
    ("v1", "Event"): "CoreV1Event",
    ("events.k8s.io/v1", "Event"): "EventsV1Event",
}

_NO_MODEL_GROUPS = {
    "cert-manager.io": "a CRD of cert-manager",
    "acme.cert-manager.io": "a CRD of cert-manager",
    "monitoring.coreos.com": "a CRD of the Prometheus Operator",
    "gibson.zeroroot.ai": "our own CRD (checked against crds/ by crd_schema.py)",
}

_LIST = re.compile(r"^list\[(.*)\]$")
_DICT = re.compile(r"^dict\(str, (.*)\)$")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$-]*$")


def join(path, key):
    """The path notation of the packaging tests: a.b[0].c, a["x.io/y"]."""
    if isinstance(key, int):
        return "%s[%d]" % (path, key)
    if not _IDENT.match(key):
        return '%s["%s"]' % (path, key.replace("\\", "\\\\").replace('"', '\\"'))
    return "%s.%s" % (path, key) if path else key


def group_of(api_version):
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def no_model_reason(api_version, kind):
    """Why model_class() has no class for this kind."""
    group = group_of(api_version or "")
    if group in _NO_MODEL_GROUPS:
        return "%s/%s is %s: python3-kubernetes has no model for it" % (api_version, kind, _NO_MODEL_GROUPS[group])
    return "python3-kubernetes has no model for apiVersion %s kind %s" % (api_version, kind)


def model_class(api_version, kind):
    """The kubernetes.client.models class of a top-level kind, or None."""
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    if group_of(api_version) in _NO_MODEL_GROUPS:
        return None
    version = api_version.rsplit("/", 1)[-1]
    name = _CLASS_OVERRIDES.get((api_version, kind)) or version[:1].upper() + version[1:] + kind
    cls = getattr(models, name, None)
    if cls is None or "kind" not in getattr(cls, "attribute_map", {}) \
            or "api_version" not in cls.attribute_map:
        return None
    return cls


_REQUIRED = {}


def required_fields(cls):
    """The JSON names of the attributes whose setter refuses None."""
    if cls not in _REQUIRED:
        conf = client.Configuration()
        conf.client_side_validation = True
        probe = cls.__new__(cls)
        probe.local_vars_configuration = conf
        required = set()
        for attr in cls.openapi_types:
            try:
                setattr(probe, attr, None)
            except ValueError:
                required.add(cls.attribute_map[attr])
        _REQUIRED[cls] = required
    return _REQUIRED[cls]


def _check(value, type_name, path, errors):
    m = _LIST.match(type_name)
    if m:
        if not isinstance(value, list):
            errors.append("%s: %r is not a list (%s)" % (path, value, type_name))
            return
        for i, item in enumerate(value):
            _check(item, m.group(1), join(path, i), errors)
        return
    m = _DICT.match(type_name)
    if m:
        if not isinstance(value, dict):
            errors.append("%s: %r is not a map (%s)" % (path, value, type_name))
            return
        for key, item in value.items():
            _check(item, m.group(1), join(path, key), errors)
        return
    if type_name == "object":
        return  # free-form or int-or-string
    if type_name == "str":
        if not isinstance(value, str):
            errors.append("%s: %r is not a string" % (path, value))
        return
    if type_name == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append("%s: %r is not an integer" % (path, value))
        return
    if type_name == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            errors.append("%s: %r is not a number" % (path, value))
        return
    if type_name == "bool":
        if not isinstance(value, bool):
            errors.append("%s: %r is not a boolean" % (path, value))
        return
    if type_name in ("datetime", "date"):
        if not isinstance(value, str) or (type_name == "datetime" and not _DATE_TIME.match(value)):
            errors.append("%s: %r is not an RFC 3339 %s" % (path, value, type_name))
        return
    cls = getattr(models, type_name, None)
    if cls is None:
        raise ValueError("%s: unsupported model type %r" % (path, type_name))
    if not isinstance(value, dict):
        errors.append("%s: %r is not an object (%s)" % (path, value, type_name))
        return
    by_json = {json_name: attr for attr, json_name in cls.attribute_map.items()}
    for key in sorted(required_fields(cls)):
        if value.get(key) is None:
            errors.append("%s: required field missing (%s.%s)" % (join(path, key), type_name, key))
    for key, item in value.items():
        sub = join(path, key)
        if key not in by_json:
            errors.append("%s: unknown field (not in %s)" % (sub, type_name))
        elif item is not None:
            _check(item, cls.openapi_types[by_json[key]], sub, errors)


def check_as(value, type_name, path):
    """Errors of `value` as the model type `type_name` (e.g. "V1ObjectMeta") at `path`."""
    errors = []
    _check(value, type_name, path, errors)
    return errors


def check(obj):
    """Errors of one object against its python3-kubernetes model ([] when valid).
    An object without a model is one error (see no_model_reason)."""
    if not isinstance(obj, dict):
        return ["<root>: not an object"]
    cls = model_class(obj.get("apiVersion"), obj.get("kind"))
    if cls is None:
        return ["<root>: " + no_model_reason(obj.get("apiVersion"), obj.get("kind"))]
    return check_as(obj, cls.__name__, "")
