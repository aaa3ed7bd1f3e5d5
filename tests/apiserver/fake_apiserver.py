#!/usr/bin/python3
"""A test Kubernetes API server for this repository's tests (standard library only).

It follows the documented API semantics closely enough to catch real client bugs
(Kubernetes "API Concepts": efficient detection of changes, resource versions,
watch bookmarks, 410 Gone, retrieving large results in chunks; the API
conventions' Status object):

- one global resourceVersion counter (like etcd's revision), a decimal string on
  every object and every list; history kept so that a paginated LIST is a
  consistent snapshot and a WATCH replays every event after a resourceVersion;
  compaction makes older versions unavailable (410 Gone, reason Expired);
- LIST with limit/continue (opaque tokens that expire on compaction),
  resourceVersion / resourceVersionMatch, labelSelector, fieldSelector;
- WATCH as a chunked stream of newline-delimited JSON events, replay, synthetic
  ADDED events for "get state and start at most recent", BOOKMARK events, a
  410 ERROR event for an expired resourceVersion, timeoutSeconds;
- GET, CREATE, UPDATE (optimistic concurrency), PATCH (merge patch RFC 7386, JSON
  patch RFC 6902, server-side apply), DELETE, the status subresource, generation,
  managedFields;
- the API server's validation of pods, secrets and both Event APIs, and the
  pods/eviction subresource with PodDisruptionBudgets (eviction.go semantics);
- faults: answers with a given status for matching requests, delays, watch
  events split at awkward byte boundaries, dropped watch connections, the server
  going away and coming back on the same port; a request log; watch counts.

Use it as a library (FakeApiServer) or run it:
  python3 fake_apiserver.py --tls-cert F --tls-key F [--port 0] [--port-file F]
      [--token-file F] [--client-ca F] [--control-port 0 --control-port-file F]
The control API (plain HTTP on 127.0.0.1) is POST /<method> with a JSON object
of keyword arguments for the library method of that name; it answers
{"result": ...} or {"error": ..., "code": ...}.
"""

import argparse
import base64
import binascii
import bisect
import collections
import copy
import datetime
import http.client
import http.server
import json
import os
import random
import re
import signal
import socket
import subprocess
import socketserver
import select
import ssl
import sys
import threading
import time
import urllib.parse
import uuid

# ---------------------------------------------------------------------------
# Resources: one line each.
# (group, version, plural, kind, namespaced, has status subresource,
#  extra field-selector labels beyond metadata.name/metadata.namespace)
RESOURCE_TABLE = [
    ("", "v1", "namespaces", "Namespace", False, True, ("status.phase",)),
    ("", "v1", "nodes", "Node", False, True, ("spec.unschedulable",)),
    ("", "v1", "events", "Event", True, False,
     ("involvedObject.kind", "involvedObject.name", "involvedObject.namespace",
      "involvedObject.uid", "reason", "type")),
    ("", "v1", "secrets", "Secret", True, False, ("type",)),
    ("", "v1", "configmaps", "ConfigMap", True, False, ()),
    ("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False, False, ()),
    ("gibson.zeroroot.ai", "v1alpha1", "components", "Component", True, True, ()),
    ("coordination.k8s.io", "v1", "leases", "Lease", True, False, ()),
    ("events.k8s.io", "v1", "events", "Event", True, False, ("reason", "type")),
    ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
     "MutatingWebhookConfiguration", False, False, ()),
    ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
     "ValidatingWebhookConfiguration", False, False, ()),
    ("", "v1", "pods", "Pod", True, True,
     ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
      "status.phase", "status.podIP", "status.nominatedNodeName")),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, True, ()),
    # Generic rows (stored as given, no validation): what `helm install` of the chart creates.
    ("", "v1", "serviceaccounts", "ServiceAccount", True, False, ()),
    ("", "v1", "services", "Service", True, True, ()),
    ("", "v1", "resourcequotas", "ResourceQuota", True, True, ()),
    ("apps", "v1", "deployments", "Deployment", True, True, ()),
    ("batch", "v1", "jobs", "Job", True, True, ()),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, False, ()),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, False, ()),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, False, ()),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True, False, ()),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, False, ()),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, True, ()),
    # Stored as given (no endpoints controller): a test names its replicas' addresses and ports.
    ("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True, False, ()),
]

CONTINUE_EXPIRED_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter.")
CONTINUE_EXPIRED_MESSAGE_WITH_TOKEN = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token "
    "in this response to retrieve the remainder of the results. Continuing with the "
    "provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may "
    "show up in the list.")

REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
    415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
    500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}
DEFAULT_MESSAGES = {
    401: "Unauthorized",
    403: "forbidden: the server does not allow this request",
    404: "the server could not find the requested resource",
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: injected fault",
    503: "The server is currently unable to handle the request",
    504: "Timeout: request did not complete within the allowed duration",
}

NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class Resource:
    def __init__(self, group, version, plural, kind, namespaced, status, fields):
        self.group, self.version, self.plural, self.kind = group, version, plural, kind
        self.namespaced, self.has_status = namespaced, status
        self.field_labels = ("metadata.name",) + (("metadata.namespace",) if namespaced else ()) + tuple(fields)
        self.api_version = version if not group else group + "/" + version
        self.id = plural if not group else plural + "." + group     # like "components.gibson.zeroroot.ai"
        self.prefix = "/api/" + version if not group else "/apis/" + group + "/" + version


RESOURCES = [Resource(*row) for row in RESOURCE_TABLE]
APPLY_PATCH = "application/apply-patch+yaml"


class ApiError(Exception):
    """An error answer: carries a v1 Status object."""

    def __init__(self, code, message, reason=None, details=None, headers=None, metadata=None):
        super().__init__("%d %s: %s" % (code, reason or REASONS.get(code, ""), message))
        self.code, self.message = code, message
        self.reason = reason if reason is not None else REASONS.get(code, "")
        self.details, self.headers, self.metadata = details, headers or {}, metadata

    def status(self):
        return make_status(self.code, self.message, self.reason, self.details, self.metadata)


def make_status(code, message, reason=None, details=None, metadata=None):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": metadata or {}, "status": "Failure",
          "message": message, "reason": reason if reason is not None else REASONS.get(code, ""),
          "code": code}
    if not st["reason"]:
        del st["reason"]          # omitempty, as the API server writes it
    if details:
        st["details"] = details
    return st


def _gr(res):
    return res.plural if not res.group else res.plural + "." + res.group


def not_found(res, name):
    return ApiError(404, '%s "%s" not found' % (_gr(res), name), "NotFound",
                    {"name": name, "group": res.group, "kind": res.plural})


def conflict(res, name, why="the object has been modified; please apply your changes to the latest version and try again"):
    return ApiError(409, 'Operation cannot be fulfilled on %s "%s": %s' % (_gr(res), name, why),
                    "Conflict", {"name": name, "group": res.group, "kind": res.plural})


def invalid(res, name, field, msg):
    return ApiError(422, '%s "%s" is invalid: %s: %s' % (res.kind, name, field, msg), "Invalid",
                    {"name": name, "group": res.group, "kind": res.kind,
                     "causes": [{"reason": "FieldValueInvalid", "message": msg, "field": field}]})


def bad_request(msg):
    return ApiError(400, msg, "BadRequest")


# -- Protobuf request bodies ---------------------------------------------------
# client-go's typed clientsets (helm's release storage among them) send Secrets, ConfigMaps and
# DeleteOptions as application/vnd.kubernetes.protobuf (k8s.io/apimachinery/pkg/runtime/serializer/
# protobuf): the 4 bytes "k8s\x00", then a runtime.Unknown message {typeMeta{apiVersion=1, kind=2}=1,
# raw=2, contentEncoding=3, contentType=4} whose raw is the object's message (field numbers from
# k8s.io/api/core/v1/generated.proto and k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto).
PROTOBUF = "application/vnd.kubernetes.protobuf"
PROTOBUF_MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    pass


def _pb_fields(buf):
    """-> [(field number, wire type, value)]: int for varint/fixed, bytes for length-delimited."""
    out, i, n = [], 0, len(buf)

    def varint():
        nonlocal i
        shift = v = 0
        while True:
            if i >= n:
                raise ProtobufError("unexpected EOF")
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7
            if shift >= 64:
                raise ProtobufError("integer overflow")
    while i < n:
        tag = varint()
        num, wt = tag >> 3, tag & 7
        if num == 0:
            raise ProtobufError("illegal tag 0 (wire type %d)" % wt)
        if wt == 0:
            out.append((num, wt, varint()))
        elif wt == 1 or wt == 5:
            size = 8 if wt == 1 else 4
            if i + size > n:
                raise ProtobufError("unexpected EOF")
            out.append((num, wt, int.from_bytes(buf[i:i + size], "little")))
            i += size
        elif wt == 2:
            size = varint()
            if i + size > n:
                raise ProtobufError("unexpected EOF")
            out.append((num, wt, bytes(buf[i:i + size])))
            i += size
        else:
            raise ProtobufError("illegal wireType %d for field %d" % (wt, num))
    return out


def _pb_str(v, wt):
    if wt != 2:
        raise ProtobufError("wrong wireType %d for a string field" % wt)
    try:
        return v.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtobufError("invalid UTF-8 in a string field")


def _pb_int(v, wt, bits=64):
    if wt != 0:
        raise ProtobufError("wrong wireType %d for an integer field" % wt)
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def _pb_map(v, wt, value=_pb_str):
    if wt != 2:
        raise ProtobufError("wrong wireType %d for a map field" % wt)
    k = val = None
    for num, wt2, x in _pb_fields(v):
        if num == 1:
            k = _pb_str(x, wt2)
        elif num == 2:
            val = value(x, wt2)
    return (k or ""), (val if val is not None else value(b"", 2))


def _pb_bytes_b64(v, wt):
    if wt != 2:
        raise ProtobufError("wrong wireType %d for a bytes field" % wt)
    return base64.b64encode(v).decode()


def _pb_time(v, wt):
    """metav1.Time {seconds=1, nanos=2} -> RFC 3339 (seconds precision, as metav1.Time marshals)."""
    secs = 0
    for num, wt2, x in _pb_fields(v):
        if num == 1:
            secs = _pb_int(x, wt2)
    return datetime.datetime.fromtimestamp(secs, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pb_owner_reference(v, wt):
    fields = {1: ("kind", _pb_str), 3: ("name", _pb_str), 4: ("uid", _pb_str), 5: ("apiVersion", _pb_str),
              6: ("controller", lambda x, w: bool(_pb_int(x, w))),
              7: ("blockOwnerDeletion", lambda x, w: bool(_pb_int(x, w)))}
    return _pb_message(v, fields)


def _pb_message(buf, fields):
    """Decodes buf by {number: (json name, decoder)}; a decoder returning a (key, value) pair fills a map,
    a name ending in [] a list. Fields not in the table are skipped (proto3 unknown fields)."""
    obj = {}
    for num, wt, v in _pb_fields(buf):
        if num not in fields:
            continue
        name, dec = fields[num]
        if name.endswith("{}"):
            k, val = dec(v, wt)
            obj.setdefault(name[:-2], {})[k] = val
        elif name.endswith("[]"):
            obj.setdefault(name[:-2], []).append(dec(v, wt))
        else:
            obj[name] = dec(v, wt)
    return obj


def _pb_object_meta(v, wt):
    if wt != 2:
        raise ProtobufError("wrong wireType %d for metadata" % wt)
    return _pb_message(v, {
        1: ("name", _pb_str), 2: ("generateName", _pb_str), 3: ("namespace", _pb_str), 4: ("selfLink", _pb_str),
        5: ("uid", _pb_str), 6: ("resourceVersion", _pb_str), 7: ("generation", _pb_int),
        8: ("creationTimestamp", _pb_time), 9: ("deletionTimestamp", _pb_time),
        10: ("deletionGracePeriodSeconds", _pb_int), 11: ("labels{}", _pb_map), 12: ("annotations{}", _pb_map),
        13: ("ownerReferences[]", _pb_owner_reference), 14: ("finalizers[]", _pb_str)})
    # managedFields (17) are not decoded: the server records its own


def _pb_bool(v, wt):
    return bool(_pb_int(v, wt))


_PB_KINDS = {
    ("v1", "Secret"): {1: ("metadata", _pb_object_meta),
                       2: ("data{}", lambda v, wt: _pb_map(v, wt, _pb_bytes_b64)), 3: ("type", _pb_str),
                       4: ("stringData{}", _pb_map), 5: ("immutable", _pb_bool)},
    ("v1", "ConfigMap"): {1: ("metadata", _pb_object_meta), 2: ("data{}", _pb_map),
                          3: ("binaryData{}", lambda v, wt: _pb_map(v, wt, _pb_bytes_b64)), 4: ("immutable", _pb_bool)},
    ("meta.k8s.io/v1", "DeleteOptions"): {
        1: ("gracePeriodSeconds", _pb_int),
        2: ("preconditions", lambda v, wt: _pb_message(v, {1: ("uid", _pb_str), 2: ("resourceVersion", _pb_str)})),
        3: ("orphanDependents", _pb_bool), 4: ("propagationPolicy", _pb_str), 5: ("dryRun[]", _pb_str)},
}
_PB_KINDS[("v1", "DeleteOptions")] = _PB_KINDS[("meta.k8s.io/v1", "DeleteOptions")]


def decode_protobuf(body):
    """An application/vnd.kubernetes.protobuf body -> the object as JSON would carry it; ProtobufError
    for what the API server's protobuf serializer refuses (or a kind this server cannot decode)."""
    if body[:4] != PROTOBUF_MAGIC:
        raise ProtobufError("provided data does not appear to be a protobuf message, expected prefix %s"
                            % list(PROTOBUF_MAGIC))
    unknown = _pb_message(body[4:], {
        1: ("typeMeta", lambda v, wt: _pb_message(v, {1: ("apiVersion", _pb_str), 2: ("kind", _pb_str)})),
        2: ("raw", lambda v, wt: v), 3: ("contentEncoding", _pb_str), 4: ("contentType", _pb_str)})
    tm = unknown.get("typeMeta") or {}
    api_version, kind = tm.get("apiVersion", ""), tm.get("kind", "")
    if not kind:
        raise ProtobufError("Object 'Kind' is missing in '%s'" % body[4:40])
    if unknown.get("contentEncoding"):
        raise ProtobufError("unsupported content encoding %r" % unknown["contentEncoding"])
    fields = _PB_KINDS.get((api_version, kind))
    if fields is None:
        raise ProtobufError("no kind %r is registered for version %r in the test API server's protobuf decoder"
                            % (kind, api_version))
    obj = _pb_message(unknown.get("raw") or b"", fields)
    return dict({"apiVersion": api_version, "kind": kind}, **obj)


def expired(msg, metadata=None):
    return ApiError(410, msg, "Expired", metadata=metadata)


# Field errors, as k8s.io/apimachinery/pkg/util/validation/field renders them.
def field_required(path, detail=""):
    return ("FieldValueRequired", path, "Required value" + (": " + detail if detail else ""))


def field_invalid(path, value, detail=""):
    body = "Invalid value: %s" % json.dumps(value)
    return ("FieldValueInvalid", path, body + (": " + detail if detail else ""))


def field_forbidden(path, detail=""):
    return ("FieldValueForbidden", path, "Forbidden" + (": " + detail if detail else ""))


def invalid_fields(res, name, errs):
    """422 Invalid for a list of field errors (reason, field, message), like errors.NewInvalid: the message
    is '<Kind[.group]> "<name>" is invalid: <one error>' or '... is invalid: [<e1>, <e2>]'."""
    rendered = ["%s: %s" % (f, m) for _, f, m in errs]
    agg = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    qkind = res.kind if not res.group else res.kind + "." + res.group
    return ApiError(422, '%s "%s" is invalid: %s' % (qkind, name, agg), "Invalid",
                    {"name": name, "group": res.group, "kind": res.kind,
                     "causes": [{"reason": r, "message": m, "field": f} for r, f, m in errs]})


QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
CONFIG_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")


def qualified_name_errors(value, path):
    """validation.IsQualifiedName (for names without a prefix or with a DNS-subdomain prefix)."""
    errs = []
    parts = value.split("/")
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append(field_invalid(path, value, "prefix part must be non-empty"))
        elif not DNS_SUBDOMAIN_RE.match(prefix) or len(prefix) > 253:
            errs.append(field_invalid(path, value, "prefix part a lowercase RFC 1123 subdomain must consist of "
                                      "lower case alphanumeric characters, '-' or '.', and must start and end "
                                      "with an alphanumeric character"))
    elif len(parts) == 1:
        name = parts[0]
    else:
        return [field_invalid(path, value, "a qualified name must consist of alphanumeric characters, '-', '_' "
                              "or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
                              "'my.name',  or '123-abc', regex used for validation is "
                              "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
                              "and '/' (e.g. 'example.com/MyName')")]
    if not name:
        errs.append(field_invalid(path, value, "name part must be non-empty"))
    elif len(name) > 63:
        errs.append(field_invalid(path, value, "name part must be no more than 63 characters"))
    if not QUALIFIED_NAME_RE.match(name):
        errs.append(field_invalid(path, value, "name part must consist of alphanumeric characters, '-', '_' or "
                                  "'.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
                                  "'my.name',  or '123-abc', regex used for validation is "
                                  "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"))
    return errs


def selector_matches(selector, labels):
    """A metav1.LabelSelector against a labels dict. None matches nothing; {} matches everything; an
    invalid selector matches nothing (as the eviction handler treats it)."""
    if not isinstance(selector, dict):
        return False
    labels = labels or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        if not isinstance(e, dict):
            return False
        k, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In":
            if not vals or labels.get(k) not in vals:
                return False
        elif op == "NotIn":
            if not vals or (k in labels and labels[k] in vals):
                return False
        elif op == "Exists":
            if vals or k not in labels:
                return False
        elif op == "DoesNotExist":
            if vals or k in labels:
                return False
        else:
            return False
    return True


def pod_qos_class(pod):
    """BestEffort, Guaranteed or Burstable, from the containers' cpu/memory requests and limits."""
    containers = list((pod.get("spec") or {}).get("containers") or []) + \
        list((pod.get("spec") or {}).get("initContainers") or [])
    any_set, guaranteed = False, True
    for c in containers:
        r = ((c or {}).get("resources") or {})
        req, lim = r.get("requests") or {}, r.get("limits") or {}
        for rn in ("cpu", "memory"):
            if rn in req or rn in lim:
                any_set = True
            if rn not in lim or req.get(rn, lim.get(rn)) != lim.get(rn):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def pod_is_ready(pod):
    for c in ((pod.get("status") or {}).get("conditions") or []):
        if isinstance(c, dict) and c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)")


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# ---------------------------------------------------------------------------
# RFC 7386 merge patch and RFC 6902 JSON patch.

def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


class PatchError(Exception):
    pass


def _json_equal(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return a == b


def _pointer(path):
    if not isinstance(path, str):
        raise PatchError("path must be a string")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError('invalid JSON pointer "%s"' % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(tok, n, allow_end):
    if tok == "-" and allow_end:
        return n
    if not re.fullmatch(r"0|[1-9][0-9]*", tok):
        raise PatchError('invalid array index "%s"' % tok)
    i = int(tok)
    if i > n or (i == n and not allow_end):
        raise PatchError("array index %d out of bounds" % i)
    return i


def _parent(doc, tokens, path):
    cur = doc
    for tok in tokens[:-1]:
        if isinstance(cur, dict):
            if tok not in cur:
                raise PatchError('path "%s": missing key "%s"' % (path, tok))
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_index(tok, len(cur), False)]
        else:
            raise PatchError('path "%s": cannot traverse a scalar' % path)
    return cur


def _get(doc, path):
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError('path "%s" does not exist' % path)
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(last, len(parent), False)]
    raise PatchError('path "%s": cannot traverse a scalar' % path)


def _add(doc, path, value):
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), True), value)
    else:
        raise PatchError('path "%s": cannot add to a scalar' % path)
    return doc


def _remove(doc, path):
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError('path "%s" does not exist' % path)
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), False))
    raise PatchError('path "%s": cannot remove from a scalar' % path)


def json_patch(doc, ops):
    if not isinstance(ops, list):
        raise bad_request("json patch must be a JSON array of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request("invalid json patch operation: %s" % json.dumps(op))
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise bad_request('json patch operation "%s" needs a value' % kind)
        if kind in ("move", "copy") and "from" not in op:
            raise bad_request('json patch operation "%s" needs from' % kind)
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            if not _pointer(path):
                doc = copy.deepcopy(op["value"])
            else:
                _get(doc, path)
                _remove(doc, path)
                doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "move":
            frm = op["from"]
            if path != frm and (path + "/").startswith(frm + "/"):
                raise PatchError('cannot move "%s" into its own child "%s"' % (frm, path))
            value = _remove(doc, frm) if _pointer(frm) else doc
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op["from"])))
        elif kind == "test":
            if not _json_equal(_get(doc, path), op["value"]):
                raise PatchError('test failed: value at "%s" is not %s' % (path, json.dumps(op["value"])))
        else:
            raise bad_request('unknown json patch operation "%s"' % kind)
    return doc


# ---------------------------------------------------------------------------
# Field management and server-side apply, as kube-apiserver's fieldmanager runs
# sigs.k8s.io/structured-merge-diff (merge/update.go, typed/{tofieldset,compare,merge}.go).
#
# A field set is a Python set of paths; a path is a tuple of FieldsV1 path elements
# ("f:status", 'k:{"type":"Ready"}', 'v:"x"'). Objects (maps) are granular; a list is
# atomic (a leaf) unless LIST_TYPES names it: "map" lists merge per key, "set" lists per
# value. Keys are the paths' field names with "*" for a list item.

LIST_TYPES = {
    # (kind or "*", field names) -> ("map", keys) | ("set", None)
    ("*", ("metadata", "ownerReferences")): ("map", ("uid",)),
    ("*", ("metadata", "finalizers")): ("set", None),
    ("*", ("status", "conditions")): ("map", ("type",)),   # Component (its CRD), Node, Namespace, Pod, PDB
    ("Pod", ("spec", "containers")): ("map", ("name",)),
    ("Pod", ("spec", "initContainers")): ("map", ("name",)),
    ("Pod", ("spec", "ephemeralContainers")): ("map", ("name",)),
    ("Pod", ("spec", "volumes")): ("map", ("name",)),
    ("Pod", ("spec", "containers", "*", "env")): ("map", ("name",)),
    ("Pod", ("spec", "containers", "*", "volumeMounts")): ("map", ("mountPath",)),
    ("Pod", ("spec", "initContainers", "*", "env")): ("map", ("name",)),
    ("Pod", ("spec", "initContainers", "*", "volumeMounts")): ("map", ("mountPath",)),
}

# stripmeta.go: never owned by anyone.
_STRIPPED = {("f:apiVersion",), ("f:kind",), ("f:metadata",)} | {
    ("f:metadata", "f:" + k) for k in ("name", "namespace", "creationTimestamp", "selfLink", "uid",
                                         "clusterName", "generation", "managedFields", "resourceVersion")}
_MISSING = object()


class FieldError(Exception):
    pass


def _list_type(kind, names):
    return LIST_TYPES.get((kind, names)) or LIST_TYPES.get(("*", names))


def _compact(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _item_pe(lt, item, names):
    mode, keys = lt
    if mode == "set":
        return "v:" + _compact(item)
    if not isinstance(item, dict):
        raise FieldError(".%s: expected map, got %s" % (".".join(names), _compact(item)))
    for k in keys:
        if k not in item:
            raise FieldError(".%s: associative list with keys has an element that omits key field %s "
                             "(and doesn't have default value)" % (".".join(names), _compact(k)))
    return "k:" + _compact({k: item[k] for k in sorted(keys)})


def _items(kind, names, lst):
    """[(path element, item)] of an associative list (the first of duplicates wins)."""
    lt = _list_type(kind, names)
    out, seen = [], set()
    for item in lst:
        pe = _item_pe(lt, item, names)
        if pe not in seen:
            seen.add(pe)
            out.append((pe, item))
    return out


def _granular_list(kind, names, v):
    return isinstance(v, list) and _list_type(kind, names) is not None


def field_set(kind, obj):
    """ToFieldSet: the paths a (partial) object sets: its leaves, null or empty maps, list items."""
    out = set()

    def walk_map(m, path, names):
        for k, v in m.items():
            p, n = path + ("f:" + k,), names + (k,)
            walk(v, p, n)
            if v is None or (isinstance(v, dict) and not v):
                out.add(p)

    def walk(v, path, names):
        if isinstance(v, dict):
            walk_map(v, path, names)
        elif _granular_list(kind, names, v):
            for pe, item in _items(kind, names, v):
                ip = path + (pe,)
                if isinstance(item, dict):
                    walk_map(item, ip, names + ("*",))
                out.add(ip)
        else:
            out.add(path)

    walk_map(obj, (), ())
    return out


def compare_fields(kind, old, new):
    """typed.Compare: (added, modified, removed) paths from old to new."""
    added, modified, removed = set(), set(), set()

    def empty(v):
        return v is _MISSING or v is None or (isinstance(v, (dict, list)) and not v)

    def cmp(l, r, path, names):
        both_maps = all(v is _MISSING or isinstance(v, dict) for v in (l, r))
        both_lists = all(v is _MISSING or _granular_list(kind, names, v) for v in (l, r))
        if (both_maps or both_lists) and not (empty(l) and empty(r)):
            if both_maps:
                lm = l if l is not _MISSING else {}
                rm = r if r is not _MISSING else {}
                for k in list(lm) + [k for k in rm if k not in lm]:
                    cmp(lm.get(k, _MISSING), rm.get(k, _MISSING), path + ("f:" + k,), names + (k,))
            else:
                li = dict(_items(kind, names, l if l is not _MISSING else []))
                ri = dict(_items(kind, names, r if r is not _MISSING else []))
                for pe in list(li) + [pe for pe in ri if pe not in li]:
                    cmp(li.get(pe, _MISSING), ri.get(pe, _MISSING), path + (pe,), names + ("*",))
            if l is _MISSING:
                added.add(path)
            elif r is _MISSING:
                removed.add(path)
        elif l is _MISSING:
            added.add(path)
        elif r is _MISSING:
            removed.add(path)
        elif not _json_equal(l, r):
            modified.add(path)

    cmp(old, new, (), ())
    for s in (added, modified, removed):
        s.discard(())
    return added, modified, removed


def merge_applied(kind, live, config, names=()):
    """typed.Merge: config over live; maps per key, associative lists per item (in SMD's order)."""
    if isinstance(live, dict) and isinstance(config, dict):
        out = dict(live)
        for k, v in config.items():
            out[k] = merge_applied(kind, live[k], v, names + (k,)) if k in live else copy.deepcopy(v)
        return out
    if isinstance(live, list) and _granular_list(kind, names, config):
        return _merge_items(kind, names, live, config)
    return copy.deepcopy(config)


def _merge_items(kind, names, lhs, rhs):
    lpes, rpes = _items(kind, names, lhs), _items(kind, names, rhs)
    lmap, rmap = dict(lpes), dict(rpes)
    mode = _list_type(kind, names)[0]

    def merged(pe):
        l, r = lmap.get(pe, _MISSING), rmap.get(pe, _MISSING)
        if r is _MISSING:
            return copy.deepcopy(l)
        if l is _MISSING or mode == "set":
            return copy.deepcopy(r)
        return merge_applied(kind, l, r, names + ("*",))

    shared = [pe for pe, _ in rpes if pe in lmap]
    out, done, li, ri = [], set(), 0, 0
    next_shared = shared.pop(0) if shared else None
    while li < len(lpes) or ri < len(rpes):
        if li < len(lpes) and ri < len(rpes):
            pe = lpes[li][0]
            if pe == rpes[ri][0]:
                done.add(pe)
                out.append(merged(pe))
                li, ri = li + 1, ri + 1
                next_shared = shared.pop(0) if shared else None
                continue
            if pe in rmap and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lpes):
            pe = lpes[li][0]
            if pe not in rmap:
                out.append(merged(pe))
                li += 1
                continue
            if pe in done:
                li += 1
        if ri < len(rpes):
            pe = rpes[ri][0]
            done.add(pe)
            out.append(merged(pe))
            ri += 1
            if next_shared is not None and next_shared == pe:
                next_shared = shared.pop(0) if shared else None
    return out


def remove_path(kind, obj, path):
    """Removes the field or list item at path (nothing if it is not there)."""
    node, names = obj, ()
    for i, pe in enumerate(path):
        last = i == len(path) - 1
        if pe.startswith("f:"):
            if not isinstance(node, dict) or pe[2:] not in node:
                return
            if last:
                del node[pe[2:]]
                return
            node, names = node[pe[2:]], names + (pe[2:],)
        else:
            lt = _list_type(kind, names)
            if not isinstance(node, list) or lt is None:
                return
            idx = next((j for j, item in enumerate(node) if _item_pe(lt, item, names) == pe), None)
            if idx is None:
                return
            if last:
                del node[idx]
                return
            node, names = node[idx], names + ("*",)


def fields_v1(paths):
    """A field set in the FieldsV1 JSON format ("." marks a path that is itself owned and has children)."""
    tree = {}
    for p in paths:
        node = tree
        for pe in p:
            node = node.setdefault(pe, {})
        node["."] = {}

    def finish(node):
        out = {}
        children = sorted(k for k in node if k != ".")
        if "." in node and children:
            out["."] = {}
        for k in children:
            out[k] = finish(node[k])
        return out
    return finish(tree)


def parse_fields_v1(tree, prefix=()):
    out = set()
    if not isinstance(tree, dict):
        return out
    if not tree and prefix:
        out.add(prefix)
    for k, v in tree.items():
        if k == ".":
            out.add(prefix)
        else:
            out |= parse_fields_v1(v, prefix + (k,))
    return out


def path_string(path):
    """fieldpath.Path.String(): .status.conditions[type="Ready"].status"""
    out = ""
    for pe in path:
        if pe.startswith("f:"):
            out += "." + pe[2:]
        elif pe.startswith("k:"):
            out += "[" + ",".join("%s=%s" % (k, _compact(v)) for k, v in json.loads(pe[2:]).items()) + "]"
        elif pe.startswith("v:"):
            out += "[=%s]" % pe[2:]
        else:
            out += "[%s]" % pe[2:]
    return out


def manager_from_user_agent(user_agent):
    """prefixFromUserAgent: up to the first '/', printable characters, at most 128 bytes."""
    out = ""
    for ch in (user_agent or "").split("/")[0]:
        if not ch.isprintable():
            continue
        if len((out + ch).encode()) > 128:
            break
        out += ch
    return out


class Managers:
    """metadata.managedFields decoded: (manager, operation, subresource) -> entry with its field set."""

    def __init__(self, entries):
        self.sets, self.meta = {}, {}
        for e in entries or []:
            if not isinstance(e, dict):
                continue
            ident = (e.get("manager") or "", e.get("operation") or "", e.get("subresource") or "")
            self.sets[ident] = parse_fields_v1(e.get("fieldsV1") or {})
            self.meta[ident] = {k: e[k] for k in ("apiVersion", "time") if k in e}

    def encode(self):
        out = []
        for ident, paths in self.sets.items():
            if not paths:
                continue
            manager, op, sub = ident
            e = {"manager": manager, "operation": op}
            e.update(self.meta.get(ident, {}))
            e["fieldsType"] = "FieldsV1"
            e["fieldsV1"] = fields_v1(paths)
            if sub:
                e["subresource"] = sub
            out.append(e)
        # managedfields.go sortEncodedManagedFields: operation, time, manager, apiVersion, subresource
        out.sort(key=lambda e: (e["operation"], e.get("time") or "", e["manager"], e.get("apiVersion") or "",
                                e.get("subresource") or ""))
        return out

    @staticmethod
    def describe(ident, meta):
        """printManager (conflict.go)."""
        manager, op, sub = ident
        s = _compact(manager)
        if sub:
            s += " with subresource %s" % _compact(sub)
        if op == "Update":
            s += " using %s" % meta.get("apiVersion", "")
            if meta.get("time"):
                s += " at %s" % meta["time"]
        return s


def _tracked(res, obj, sub):
    """The object as field management sees it: no managedFields, and only what this endpoint writes
    (the status subresource: no spec; the main resource of a kind with a status subresource: no status)."""
    out = {k: v for k, v in obj.items() if not (k == "spec" and sub == "status")
           and not (k == "status" and sub != "status" and res.has_status)}
    md = dict(out.get("metadata") or {})
    md.pop("managedFields", None)
    out["metadata"] = md
    return out


def _owned_paths(paths):
    return {p for p in paths if p not in _STRIPPED}


def _update_managers(res, managers, old, new, workflow, force):
    """Updater.update: conflicts with (force: taken from) the other managers; removed fields disowned."""
    added, modified, removed = compare_fields(res.kind, old, new)
    changed = added | modified
    conflicts = {}
    for ident, paths in managers.sets.items():
        if ident == workflow:
            continue
        hit = paths & changed
        if hit:
            conflicts[ident] = hit
    if conflicts and not force:
        raise apply_conflict(conflicts, managers)
    for ident in list(managers.sets):
        if ident != workflow:
            managers.sets[ident] = managers.sets[ident] - conflicts.get(ident, set()) - removed
        if not managers.sets[ident]:
            del managers.sets[ident]
    return added, modified, removed


def apply_conflict(conflicts, managers):
    flat = sorted((path_string(p), ident) for ident, paths in conflicts.items() for p in paths)
    causes = [{"reason": "FieldManagerConflict", "message": "conflict with %s"
               % Managers.describe(ident, managers.meta.get(ident, {})), "field": p} for p, ident in flat]
    if len(flat) == 1:
        msg = "Apply failed with 1 conflict: %s: %s" % (causes[0]["message"], flat[0][0])
    else:
        lines = []
        for ident in sorted(conflicts, key=lambda i: _compact(list(i))):
            lines.append("conflicts with %s:" % Managers.describe(ident, managers.meta.get(ident, {})))
            lines.extend("- %s" % p for p, i in flat if i == ident)
        msg = "Apply failed with %d conflicts: %s" % (len(flat), "\n".join(lines))
    return ApiError(409, msg, "Conflict", {"causes": causes})


def track_update(res, old, new, manager, sub, request_entries=None):
    """fieldmanager Update: `new` (to be stored) gets metadata.managedFields, with what changed from `old`
    (None: a create) owned by (manager, Update, sub) and taken from every other manager."""
    base = request_entries if request_entries and sub != "status" else (old or {}).get("metadata", {}).get("managedFields")
    managers = Managers(base)
    old_t = _tracked(res, old or {"metadata": {}}, sub)
    new_t = _tracked(res, new, sub)
    current = ("\x00current-operation", "Update", sub or "")
    try:
        added, modified, removed = _update_managers(res, managers, old_t, new_t, current, True)
    except FieldError:
        return          # UpdateNoErrors: a list the schema cannot key is left untracked
    taken = _owned_paths(added | modified)
    ident = (manager, "Update", sub or "")
    if taken:
        managers.sets[ident] = (managers.sets.get(ident, set()) | taken) - removed
        managers.meta[ident] = {"apiVersion": res.api_version, "time": now_rfc3339()}
    managers.sets.pop(current, None)
    entries = managers.encode()
    if entries:
        new["metadata"]["managedFields"] = entries
    else:
        new["metadata"].pop("managedFields", None)


def apply_config(res, live, config, manager, force, sub):
    """fieldmanager Apply: live (None: the object does not exist) with config applied by (manager, Apply,
    sub): the merged object, pruned of what manager applied last time and no longer applies (unless
    someone else owns it), with its managedFields. Raises ApiError 409 on conflicts without force."""
    live = live or {"metadata": {}}
    managers = Managers(live.get("metadata", {}).get("managedFields"))
    ident = (manager, "Apply", sub or "")
    live_t = _tracked(res, live, sub)
    config_t = _tracked(res, config, sub)
    try:
        new_t = merge_applied(res.kind, live_t, config_t)
        applied = _owned_paths(field_set(res.kind, config_t))
    except FieldError as e:
        raise ApiError(500, "failed to create typed patch object (%s; %s): %s"
                       % (res.api_version, res.kind, e), "InternalError")
    last = managers.sets.get(ident, set())
    managers.sets[ident] = applied
    owned = set()
    for paths in managers.sets.values():
        for p in paths:
            owned.update(p[:i] for i in range(1, len(p) + 1))
    for p in sorted(last - applied, key=len):      # an item before its fields
        if p not in owned:
            remove_path(res.kind, new_t, p)
    _update_managers(res, managers, live_t, new_t, ident, force)
    managers.sets[ident] = applied
    if not applied:
        managers.sets.pop(ident, None)
    if not _json_equal(live_t, new_t) or "time" not in managers.meta.get(ident, {}):
        managers.meta[ident] = {"apiVersion": res.api_version, "time": now_rfc3339()}
    else:
        managers.meta[ident]["apiVersion"] = res.api_version
    out = copy.deepcopy(live)
    for k in [k for k in out if k != "metadata"]:
        if k in ("apiVersion", "kind") or (k == "spec" and sub == "status") or (
                k == "status" and sub != "status" and res.has_status):
            continue
        del out[k]
    for k, v in new_t.items():
        if k != "metadata":
            out[k] = v
    md = dict(new_t.get("metadata") or {})
    for k in ("uid", "resourceVersion", "creationTimestamp", "generation", "deletionTimestamp"):
        if k in live.get("metadata", {}):
            md[k] = live["metadata"][k]
    entries = managers.encode()
    if entries:
        md["managedFields"] = entries
    out["metadata"] = md
    out["apiVersion"], out["kind"] = res.api_version, res.kind
    return out


def decode_apply_body(body):
    """An apply patch: YAML (JSON is YAML); a map."""
    text = body.decode("utf-8", errors="replace")
    try:
        obj = json.loads(text)
    except ValueError:
        try:
            import yaml      # python3-yaml; only for bodies that are not JSON
            obj = yaml.safe_load(text)
        except ImportError:
            raise bad_request("error decoding YAML: a YAML apply body needs python3-yaml here; send JSON")
        except yaml.YAMLError as e:
            raise bad_request("error decoding YAML: %s" % str(e).replace("\n", " "))
    if not isinstance(obj, dict):
        raise bad_request("error decoding YAML: the body must be a map")
    return obj


# ---------------------------------------------------------------------------
# Selectors.

def parse_label_selector(text):
    """Returns a list of predicates over a labels dict; raises ApiError on bad syntax."""
    preds = []
    if not text:
        return preds
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for raw in parts:
        p = raw.strip()
        m = re.fullmatch(r"([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^)]*)\)", p)
        if m:
            key, op, vals = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",") if v.strip()}
            if op == "in":
                preds.append(lambda l, k=key, vs=vals: k in l and l[k] in vs)
            else:
                preds.append(lambda l, k=key, vs=vals: not (k in l and l[k] in vs))
            continue
        m = re.fullmatch(r"([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)", p)
        if m:
            key, op, val = m.groups()
            if op == "!=":
                preds.append(lambda l, k=key, v=val: l.get(k) != v)
            else:
                preds.append(lambda l, k=key, v=val: k in l and l[k] == v)
            continue
        m = re.fullmatch(r"(!?)([A-Za-z0-9_./-]+)", p)
        if m:
            neg, key = m.groups()
            preds.append((lambda l, k=key: k not in l) if neg else (lambda l, k=key: k in l))
            continue
        raise bad_request('unable to parse requirement: invalid label selector "%s"' % text)
    return preds


def _field_value(obj, label):
    cur = obj
    for part in label.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def parse_field_selector(res, text):
    preds = []
    if not text:
        return preds
    for raw in text.split(","):
        p = raw.strip()
        if not p:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)", p)
        if not m:
            raise bad_request('invalid field selector "%s"' % text)
        label, op, val = m.groups()
        if label not in res.field_labels:
            raise bad_request('field label not supported: %s' % label)
        if op == "!=":
            preds.append(lambda o, f=label, v=val: _field_value(o, f) != v)
        else:
            preds.append(lambda o, f=label, v=val: _field_value(o, f) == v)
    return preds


class Filter:
    def __init__(self, res, namespace=None, label_selector=None, field_selector=None, name=None):
        self.namespace = namespace
        self.labels = parse_label_selector(label_selector)
        self.fields = parse_field_selector(res, field_selector)
        if name is not None:
            self.fields.append(lambda o, n=name: o.get("metadata", {}).get("name") == n)
        self.has_selectors = bool(self.labels or self.fields)

    def matches(self, obj):
        if obj is None:
            return False
        md = obj.get("metadata", {})
        if self.namespace is not None and md.get("namespace") != self.namespace:
            return False
        labels = md.get("labels") or {}
        return all(p(labels) for p in self.labels) and all(p(obj) for p in self.fields)


# ---------------------------------------------------------------------------
# Validation and defaulting of API writes (HTTP only; the back door stores what it is given),
# after pkg/apis/core/validation and the registries' PrepareForCreate.

def _event_fields(ev, events_v1):
    """The internal core.Event fields of a core/v1 or an events.k8s.io/v1 Event."""
    g = lambda k: ev.get(k)  # noqa: E731
    if events_v1:
        src = g("deprecatedSource") or {}
        return {"eventTime": g("eventTime"), "involvedObject": g("regarding"), "reason": g("reason") or "",
                "message": g("note") or "", "source": src, "firstTimestamp": g("deprecatedFirstTimestamp"),
                "lastTimestamp": g("deprecatedLastTimestamp"), "count": g("deprecatedCount") or 0,
                "type": g("type") or "", "action": g("action") or "", "related": g("related"),
                "reportingController": g("reportingController") or "",
                "reportingInstance": g("reportingInstance") or "", "series": g("series")}
    return {"eventTime": g("eventTime"), "involvedObject": g("involvedObject"), "reason": g("reason") or "",
            "message": g("message") or "", "source": g("source") or {}, "firstTimestamp": g("firstTimestamp"),
            "lastTimestamp": g("lastTimestamp"), "count": g("count") or 0, "type": g("type") or "",
            "action": g("action") or "", "related": g("related"),
            "reportingController": g("reportingComponent") or "",
            "reportingInstance": g("reportingInstance") or "", "series": g("series")}


def validate_event(ev, namespace, events_v1, old=None):
    """ValidateEventCreate / ValidateEventUpdate: field errors (reason, field, message)."""
    e = _event_fields(ev, events_v1)
    errs = []
    io_ns = (e["involvedObject"] or {}).get("namespace") or ""
    rc_field = "reportingController" if events_v1 else "source"
    if not e["eventTime"]:
        if not io_ns:
            if namespace not in ("", "default"):
                errs.append(field_invalid("involvedObject.namespace", io_ns, "does not match event.namespace"))
        elif namespace != io_ns:
            errs.append(field_invalid("involvedObject.namespace", io_ns, "does not match event.namespace"))
    else:
        if not io_ns and namespace not in ("default", "kube-system"):
            errs.append(field_invalid("involvedObject.namespace", io_ns, "does not match event.namespace"))
        if not e["reportingController"]:
            errs.append(field_required(rc_field))
        errs.extend(qualified_name_errors(e["reportingController"], rc_field))
        for f, limit in (("reportingInstance", 128), ("action", 128), ("reason", 128)):
            if not e[f]:
                errs.append(field_required(f))
            if len(e[f]) > limit:
                errs.append(field_invalid(f, "", "can have at most %d characters" % limit))
        if len(e["message"]) > 1024:
            errs.append(field_invalid("message", "", "can have at most 1024 characters"))
    if not events_v1:
        return errs
    series = e["series"]
    if series is not None:
        if int((series or {}).get("count") or 0) < 2:
            errs.append(field_invalid("series.count", "", "should be at least 2"))
        if not (series or {}).get("lastObservedTime"):
            errs.append(field_required("series.lastObservedTime"))
    if old is not None:
        o = _event_fields(old, True)
        for f in ("involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count",
                  "type", "eventTime", "action", "related", "reportingController", "reportingInstance"):
            if not _json_equal(e[f], o[f]):
                errs.append(field_invalid(f, e[f], "field is immutable"))
        return errs
    if not e["eventTime"]:
        errs.append(field_required("eventTime"))
    if e["type"] not in ("Normal", "Warning"):
        errs.append(field_invalid("type", "", "has invalid value: %s" % e["type"]))
    for f, path in (("firstTimestamp", "deprecatedFirstTimestamp"), ("lastTimestamp", "deprecatedLastTimestamp")):
        if e[f]:
            errs.append(field_invalid(path, "", "needs to be unset"))
    if e["count"]:
        errs.append(field_invalid("deprecatedCount", "", "needs to be unset"))
    if e["source"].get("component") or e["source"].get("host"):
        errs.append(field_invalid("deprecatedSource", "", "needs to be unset"))
    return errs


def check_secret_data(obj):
    """Secret.data is map[string][]byte: every value standard base64 (else the decode fails: 400)."""
    data = obj.get("data")
    if data is None:
        return
    if not isinstance(data, dict):
        raise bad_request('Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal %s into '
                          'Go struct field Secret.data of type map[string][]uint8' % type(data).__name__)
    for k, v in data.items():
        if not isinstance(v, str):
            raise bad_request('Secret in version "v1" cannot be handled as a Secret: json: cannot unmarshal '
                              'non-string into Go struct field Secret.data of type []uint8')
        bad = next((i for i, c in enumerate(v) if not (c.isascii() and (c.isalnum() or c in "+/="))), None)
        if bad is None:
            try:
                base64.b64decode(v.encode(), validate=True)
            except (binascii.Error, ValueError):
                bad = len(v) - len(v) % 4 if len(v) % 4 else max(0, len(v) - 1)
        if bad is not None:
            raise bad_request('Secret in version "v1" cannot be handled as a Secret: illegal base64 data at '
                              'input byte %d' % bad)


def validate_secret(obj, old=None):
    errs = []
    data = obj.get("data") or {}
    for k in data:
        if not CONFIG_KEY_RE.match(k):
            errs.append(field_invalid("data[%s]" % k, k, "a valid config key must consist of alphanumeric "
                                      "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or "
                                      "'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"))
    if obj.get("type") == "kubernetes.io/tls":
        for k in ("tls.crt", "tls.key"):
            if k not in data:
                errs.append(field_required("data[%s]" % k))
    if old is not None:
        if obj.get("type") != old.get("type"):
            errs.append(field_invalid("type", obj.get("type"), "field is immutable"))
        if old.get("immutable") is True:
            if obj.get("immutable") is not True:
                errs.append(field_forbidden("immutable", "field is immutable when `immutable` is set"))
            if not _json_equal(obj.get("data") or {}, old.get("data") or {}):
                errs.append(field_forbidden("data", "field is immutable when `immutable` is set"))
    return errs


def validate_ephemeral_containers(eph, old_eph):
    """pods/ephemeralcontainers: each needs a name and an image; existing ones may not change or go."""
    errs = []
    if not isinstance(eph, list):
        return [field_invalid("spec.ephemeralContainers", eph, "must be a list")]
    names = set()
    for i, c in enumerate(eph):
        c = c if isinstance(c, dict) else {}
        if not c.get("name"):
            errs.append(field_required("spec.ephemeralContainers[%d].name" % i))
        if not c.get("image"):
            errs.append(field_required("spec.ephemeralContainers[%d].image" % i))
        names.add(c.get("name"))
    by_name = {c.get("name"): c for c in eph if isinstance(c, dict)}
    for c in old_eph:
        n = c.get("name")
        if n not in names:
            errs.append(field_forbidden("spec.ephemeralContainers", "existing ephemeral containers \"%s\" may "
                                        "not be removed" % n))
        elif not _json_equal(by_name.get(n), c):
            errs.append(field_forbidden("spec.ephemeralContainers[%s]" % n, "may not be changed"))
    return errs


def validate_pod(obj, old=None):
    spec = obj.get("spec") or {}
    if old is not None:
        def mutable_stripped(sp):
            sp = copy.deepcopy(sp or {})
            for f in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"):
                sp.pop(f, None)
            for f in ("containers", "initContainers"):
                for c in sp.get(f) or []:
                    if isinstance(c, dict):
                        c.pop("image", None)
            return sp
        if not _json_equal(mutable_stripped(spec), mutable_stripped(old.get("spec"))):
            return [field_forbidden("spec", POD_UPDATE_FORBIDDEN)]
        return []
    errs = []
    containers = spec.get("containers")
    if not containers:
        return [field_required("spec.containers")]
    for i, c in enumerate(containers):
        c = c if isinstance(c, dict) else {}
        if not c.get("name"):
            errs.append(field_required("spec.containers[%d].name" % i))
        if not c.get("image"):
            errs.append(field_required("spec.containers[%d].image" % i))
    return errs


# ---------------------------------------------------------------------------
# The store: current state, per-key version history, event log, watchers.

class Event:
    __slots__ = ("rv", "res", "type", "obj", "old", "_bytes")

    def __init__(self, rv, res, type_, obj, old):
        self.rv, self.res, self.type, self.obj, self.old = rv, res, type_, obj, old
        self._bytes = {}

    def line(self, type_=None):
        t = type_ or self.type
        b = self._bytes.get(t)
        if b is None:
            b = dumps({"type": t, "object": self.obj}) + b"\n"
            self._bytes[t] = b
        return b


class Watcher:
    def __init__(self, server, res, flt, allow_bookmarks, timeout, peer):
        self.server, self.res, self.filter = server, res, flt
        self.allow_bookmarks, self.timeout, self.peer = allow_bookmarks, timeout, peer
        self.cond = threading.Condition(threading.Lock())
        self.queue = collections.deque()    # bytes lines
        self.drop_now = False
        self.drop_after = None              # data events still to send before dropping
        self.drop_mid_event = False
        self.drop_rst = False
        self.events_sent = 0
        self.started = time.monotonic()

    def push(self, line):
        with self.cond:
            self.queue.append(line)
            self.cond.notify_all()

    def offer(self, ev):
        """Called with the store lock held: enqueue ev as this watch sees it."""
        new_ok = self.filter.matches(ev.obj) if ev.type != "DELETED" else False
        old_ok = self.filter.matches(ev.old) if ev.old is not None else False
        if ev.type == "ADDED":
            if new_ok:
                self.push(ev.line("ADDED"))
        elif ev.type == "MODIFIED":
            if new_ok and old_ok:
                self.push(ev.line("MODIFIED"))
            elif new_ok:
                self.push(ev.line("ADDED"))
            elif old_ok:
                self.push(ev.line("DELETED"))
        elif ev.type == "DELETED":
            if self.filter.matches(ev.obj):
                self.push(ev.line("DELETED"))


class Store:
    def __init__(self, initial_rv=1, max_history=None):
        self.max_history = max_history     # keep about this many events (older ones compacted), None: all
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = int(initial_rv)
        self.compacted = 0                 # versions/events with rv <= compacted are gone
        self.versions = {r.id: {} for r in RESOURCES}   # res.id -> key -> [(rv, obj or None)]
        self.events = []                   # Event, ascending rv
        self.event_rvs = []
        self.watchers = set()
        self._last_write = {}              # res.id -> revision of its last write
        self._state_cache = {}             # res.id -> state_at(any rv >= _last_write)

    @staticmethod
    def key(res, namespace, name):
        return (namespace + "/" + name) if res.namespaced else name

    def current(self, res, key):
        vs = self.versions[res.id].get(key)
        if not vs:
            return None
        return vs[-1][1]

    def state_at(self, res, rv):
        """Sorted (key, object) pairs of res as of revision rv. Treat as read-only."""
        cached = self._state_cache.get(res.id)
        if cached is not None and rv >= self._last_write.get(res.id, 0):
            return cached
        out = self._state_at(res, rv)
        if rv >= self._last_write.get(res.id, 0):
            self._state_cache[res.id] = out
        return out

    def _state_at(self, res, rv):
        out = []
        for key, vs in self.versions[res.id].items():
            if vs[-1][0] <= rv:
                obj = vs[-1][1]
            else:
                i = bisect.bisect_right([v[0] for v in vs], rv) - 1
                obj = vs[i][1] if i >= 0 else None
            if obj is not None:
                out.append((key, obj))
        out.sort(key=lambda kv: kv[0])
        return out

    def commit(self, res, key, type_, obj, old):
        """Stores obj (None for a deletion) at a new revision. Lock held by the caller."""
        self.rv += 1
        rv = self.rv
        self._last_write[res.id] = rv
        self._state_cache.pop(res.id, None)
        if obj is not None:
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = str(rv)
            self.versions[res.id].setdefault(key, []).append((rv, obj))
            ev_obj = obj
        else:
            ev_obj = copy.deepcopy(old)
            ev_obj["metadata"]["resourceVersion"] = str(rv)
            self.versions[res.id].setdefault(key, []).append((rv, None))
        ev = Event(rv, res, type_, ev_obj, old)
        self.events.append(ev)
        self.event_rvs.append(rv)
        for w in list(self.watchers):
            if w.res is res:
                w.offer(ev)
        self.changed.notify_all()
        if self.max_history and len(self.events) > self.max_history + max(16, self.max_history // 4):
            self.compact(self.events[-self.max_history].rv - 1)
        return ev_obj

    def rewind(self, rv):
        """etcd restored from a backup taken at revision rv: every version and event after it is gone and
        the revision counter goes back to rv (later writes reuse the revisions after it)."""
        with self.lock:
            rv = int(rv)
            if rv > self.rv or rv < self.compacted:
                raise ValueError("cannot rewind to %d: revisions %d..%d are kept" % (rv, self.compacted, self.rv))
            for table in self.versions.values():
                for key in list(table):
                    kept = [v for v in table[key] if v[0] <= rv]
                    if kept:
                        table[key] = kept
                    else:
                        del table[key]
            i = bisect.bisect_right(self.event_rvs, rv)
            del self.events[i:]
            del self.event_rvs[i:]
            self.rv = rv
            self._last_write = {k: rv for k in self._last_write}
            self._state_cache.clear()
            self.changed.notify_all()
            return rv

    def compact(self, rv=None):
        with self.lock:
            c = self.rv if rv is None else min(int(rv), self.rv)
            if c <= self.compacted:
                return self.compacted
            self.compacted = c
            i = bisect.bisect_right(self.event_rvs, c)
            del self.events[:i]
            del self.event_rvs[:i]
            for table in self.versions.values():
                for key in list(table):
                    vs = table[key]
                    j = bisect.bisect_right([v[0] for v in vs], c) - 1
                    if j > 0:
                        del vs[:j]
                    if vs and vs[0][0] <= c and vs[0][1] is None:
                        del vs[0]
                    if not vs:
                        del table[key]
            return c


# ---------------------------------------------------------------------------
# Admission webhooks (Kubernetes "Dynamic Admission Control"; the dispatchers in
# k8s.io/apiserver/pkg/admission/plugin/webhook).

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
WEBHOOK_CONFIG_PLURALS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
SIDE_EFFECTS_DRY_RUN_OK = ("None", "NoneOnDryRun")


class _CallError(Exception):
    """webhookutil.ErrCallingWebhook: the call failed (failurePolicy decides)."""


def _webhook_selector_matches(selector, labels):
    """A webhook's namespaceSelector/objectSelector: absent or {} selects everything."""
    if selector is None or selector == {}:
        return True
    return selector_matches(selector, labels)


def _rule_matches(rule, op, group, version, resource, sub, namespace, is_namespace):
    """rules.Matcher: operations, apiGroups, apiVersions, resources ("*", "*/*", "pods/*", "*/status"), scope."""
    def has(lst, v):
        return "*" in (lst or []) or v in (lst or [])
    if not (has(rule.get("operations"), op) and has(rule.get("apiGroups"), group)
            and has(rule.get("apiVersions"), version)):
        return False
    ok = False
    for r in rule.get("resources") or []:
        if r == "*/*":
            ok = True
            break
        rres, _, rsub = r.partition("/")
        if (rres == "*" or rres == resource) and (rsub == "*" or rsub == (sub or "")):
            ok = True
            break
    if not ok:
        return False
    scope = rule.get("scope") or "*"
    if scope == "Namespaced":
        return not is_namespace and bool(namespace)
    if scope == "Cluster":
        return is_namespace or not namespace
    return True


def _warning_value(text):
    """One Warning header value, as k8s.io/apiserver/pkg/warning writes it: 299 - "text"."""
    return '299 - "%s"' % str(text).replace("\\", "\\\\").replace('"', '\\"')


def _apply_json_patch(doc, ops):
    try:
        import jsonpatch      # python3-jsonpatch, as the brief asks; the module's own RFC 6902 code otherwise
    except ImportError:       # pragma: no cover
        return json_patch(doc, ops)
    return jsonpatch.apply_patch(doc, ops)


def _denied_error(hook_name, status):
    """webhookerrors.ToStatusErr."""
    status = dict(status) if isinstance(status, dict) else {}
    denied = 'admission webhook "%s" denied the request' % hook_name
    code = status.get("code")
    code = int(code) if isinstance(code, int) and code >= 400 else 400
    if status.get("message"):
        msg = "%s: %s" % (denied, status["message"])
    elif status.get("reason"):
        msg = "%s: %s" % (denied, status["reason"])
    else:
        msg = "%s without explanation" % denied
    return ApiError(code, msg, status.get("reason") or "", status.get("details"), metadata=status.get("metadata"))


def _post_webhook(connect, server_name, ctx, path_query, host_header, body, timeout):
    """POSTs body over TLS to connect=(host, port), verifying server_name; bounded by timeout in total.
    -> (status, bytes). Raises _CallError with Go-like text."""
    box = {}
    done = threading.Event()
    holder = {}

    def run():
        sock = None
        try:
            sock = socket.create_connection(connect, timeout=timeout + 1)
            holder["sock"] = sock
            tls = ctx.wrap_socket(sock, server_hostname=server_name)
            holder["sock"] = tls
            head = ("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                    "Accept: application/json, */*\r\nUser-Agent: kube-apiserver-admission\r\n"
                    "Content-Length: %d\r\nConnection: close\r\n\r\n" % (path_query, host_header, len(body)))
            tls.sendall(head.encode() + body)
            resp = http.client.HTTPResponse(tls)
            resp.begin()
            box["result"] = (resp.status, resp.read(4 * 1024 * 1024))
        except ssl.SSLCertVerificationError as e:
            if getattr(e, "verify_code", None) == 62:
                box["error"] = "tls: failed to verify certificate: x509: certificate is not valid for %s (%s)" % (
                    server_name, e.verify_message)
            else:
                box["error"] = ("tls: failed to verify certificate: x509: certificate signed by unknown authority"
                                " (%s)" % getattr(e, "verify_message", e))
        except ConnectionRefusedError:
            box["error"] = "dial tcp %s:%d: connect: connection refused" % connect
        except (socket.timeout, TimeoutError):
            box["error"] = "context deadline exceeded"
        except (OSError, http.client.HTTPException, ValueError) as e:
            box["error"] = "%s: %s" % (type(e).__name__, e)
        finally:
            if sock is not None:
                try:
                    holder.get("sock", sock).close()
                except OSError:
                    pass
            done.set()

    t = threading.Thread(target=run, daemon=True, name="webhook-call")
    t.start()
    if not done.wait(timeout):
        s = holder.get("sock")
        if s is not None:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        raise _CallError("context deadline exceeded")
    if "error" in box:
        raise _CallError(box["error"])
    return box["result"]


# ---------------------------------------------------------------------------
# Fault rules.

class Rule:
    def __init__(self, rid, method=None, path=None, query=None, watch=None, count=None, **extra):
        self.id = rid
        self.method = method.upper() if method else None
        self.path = re.compile(path) if path else None
        self.query = re.compile(query) if query else None
        self.watch = watch
        self.count = count
        self.extra = extra

    def matches(self, method, path, raw_query, is_watch):
        if self.method and self.method != method:
            return False
        if self.path and not self.path.search(path):
            return False
        if self.query and not self.query.search(raw_query):
            return False
        if self.watch is not None and bool(self.watch) != is_watch:
            return False
        return True

    def describe(self):
        d = {"id": self.id, "method": self.method, "path": self.path.pattern if self.path else None,
             "query": self.query.pattern if self.query else None, "watch": self.watch, "count": self.count}
        d.update(self.extra)
        return d


class _Abort(Exception):
    pass


def _truthy(v):
    return v is not None and v.lower() in ("1", "true", "yes")


# ---------------------------------------------------------------------------
# HTTP.

class _TLSServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, handler, owner):
        self.owner = owner
        super().__init__(addr, handler)

    def finish_request(self, request, client_address):
        owner = self.owner
        conn = None
        try:
            request.settimeout(10)
            conn = owner.ssl_context.wrap_socket(request, server_side=True)
            conn.settimeout(owner.idle_timeout)
        except (OSError, ssl.SSLError):
            try:
                request.close()
            except OSError:
                pass
            return
        with owner._conn_lock:
            owner._conns.add(conn)
        try:
            self.RequestHandlerClass(conn, client_address, self)
        except (OSError, ssl.SSLError, _Abort):
            pass
        finally:
            with owner._conn_lock:
                owner._conns.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def shutdown_request(self, request):
        try:
            request.close()
        except OSError:
            pass

    def handle_error(self, request, client_address):
        if self.owner.verbose:
            super().handle_error(request, client_address)


class _ApiHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-apiserver"
    sys_version = ""

    def log_message(self, fmt, *args):
        if self.server.owner.verbose:
            sys.stderr.write("fake-apiserver: " + (fmt % args) + "\n")

    def do_GET(self):
        self.server.owner._handle(self)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET


class _ControlHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _reply(self, code, obj):
        body = json.dumps(obj, default=str).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/healthz":
            return self._reply(200, {"result": "ok"})
        if path == "/":
            return self._reply(200, {"result": sorted(CONTROL_METHODS)})
        self._reply(405, {"error": "use POST /<method> with a JSON object of keyword arguments"})

    def do_POST(self):
        name = urllib.parse.urlsplit(self.path).path.strip("/")
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            kwargs = json.loads(raw) if raw.strip() else {}
            if not isinstance(kwargs, dict):
                raise ValueError("the body must be a JSON object of keyword arguments")
        except ValueError as e:
            return self._reply(400, {"error": str(e)})
        if name not in CONTROL_METHODS:
            return self._reply(404, {"error": "unknown control method %r" % name,
                                     "methods": sorted(CONTROL_METHODS)})
        try:
            result = getattr(self.server.owner, name)(**kwargs)
        except ApiError as e:
            return self._reply(e.code, {"error": e.message, "code": e.code, "status": e.status()})
        except TimeoutError as e:
            return self._reply(408, {"error": str(e), "code": 408})
        except (TypeError, ValueError, KeyError, re.error) as e:
            return self._reply(400, {"error": "%s: %s" % (type(e).__name__, e), "code": 400})
        self._reply(200, {"result": result})


class _ControlServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, addr, owner):
        self.owner = owner
        super().__init__(addr, _ControlHandler)


CONTROL_METHODS = {
    "create", "put", "update", "update_status", "patch", "delete", "get", "list", "resource_version",
    "compact", "compacted_resource_version", "inject_fault", "clear_faults", "faults", "add_delay",
    "clear_delays", "set_watch_chunking", "drop_watches", "clear_watch_drops", "set_watch_expired_mode",
    "set_bookmark_interval", "set_tokens", "add_token", "go_away", "come_back", "is_away",
    "requests", "request_mark", "wait_for_request", "open_watches", "watches_started", "wait_for_watch",
    "wait_for_watches_closed", "set_continue_expired_token", "reset_faults", "clear_requests", "evictions",
    "set_admission", "set_service_endpoints", "add_service_endpoint", "add_user", "webhook_calls",
    "rewind", "set_watch_silence", "set_continue_ttl", "revoke_token", "deny_client_cn",
}


def make_client_certificates(out_dir, cns, days=1):
    """A client CA (out_dir/client-ca.crt) and, for each CN of `cns`, a client certificate signed by it
    (extendedKeyUsage clientAuth): {"ca": path, CN: (cert path, key path), ...}. Uses the openssl command."""
    os.makedirs(out_dir, exist_ok=True)
    ca_key, ca_crt = os.path.join(out_dir, "client-ca.key"), os.path.join(out_dir, "client-ca.crt")

    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=60)

    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", str(days),
        "-keyout", ca_key, "-out", ca_crt, "-subj", "/CN=fake-apiserver-client-ca",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    out = {"ca": ca_crt}
    for cn in cns:
        key, csr, crt = (os.path.join(out_dir, cn + ext) for ext in (".key", ".csr", ".crt"))
        ext = os.path.join(out_dir, cn + ".ext")
        with open(ext, "w") as f:
            f.write("extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n")
        run("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=" + cn + "/O=system:masters")
        run("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-days", str(days),
            "-extfile", ext, "-out", crt)
        out[cn] = (crt, key)
    return out


class FakeApiServer:
    """A test Kubernetes API server. See the module docstring; every method is also a control-API call."""

    def __init__(self, tls_cert, tls_key, token_file=None, tokens=(), host="127.0.0.1", port=0,
                 control_port=None, bookmark_interval=1.0, default_watch_timeout=1800.0,
                 too_large_rv_wait=3.0, initial_resource_version=1, idle_timeout=120.0,
                 items_type_meta=True, max_history=None, verbose=False, admission=True,
                 service_endpoints=None, users=None, client_ca=None):
        self.tls_cert, self.tls_key = tls_cert, tls_key
        self._token_expiry = {}                  # bearer token -> time.monotonic() it stops being accepted
        self._denied_cns = set()                 # client certificate CNs refused (401)
        self._revoked = set()                    # bearer tokens revoke_token() refused
        self._admission = bool(admission)        # call the stored webhook configurations' webhooks
        self._service_endpoints = dict(service_endpoints or {})   # "ns/name[:port]" -> "host:port"
        self._users = dict(users or {})          # bearer token -> userInfo for AdmissionReviews
        self._plan = threading.local()           # planned (not yet committed) writes of this thread
        self._webhook_calls = []
        self.token_file = token_file
        self._tokens = set(tokens)
        self.host = host
        self._port = int(port)
        self._control_port = control_port
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = float(default_watch_timeout)
        self.too_large_rv_wait = float(too_large_rv_wait)
        self.idle_timeout = idle_timeout
        self.items_type_meta = items_type_meta
        self.verbose = verbose
        self.store = Store(initial_resource_version, max_history)
        self.ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ssl_context.load_cert_chain(tls_cert, tls_key)
        self.ssl_context.set_alpn_protocols(["http/1.1"])
        if client_ca:
            # Client certificates (x509 authentication, as the API server's
            # --client-ca-file): asked for, verified against client_ca when
            # given (a bad one fails the handshake), optional.
            self.ssl_context.verify_mode = ssl.CERT_OPTIONAL
            self.ssl_context.load_verify_locations(cafile=client_ca)
        self._lock = threading.RLock()          # faults, delays, log, settings
        self._log_cond = threading.Condition(self._lock)
        self._log = []
        self._faults = []
        self._delays = []
        self._holding = []  # delay rules holding a request now (one entry per request)
        self._rule_ids = 0
        self._chunking = {"mode": "event", "max_chunk": 8192, "coalesce_window": 0.05, "rng": random.Random(0)}
        self._drop_future = None
        self._watch_expired_mode = "event"
        self._continue_token_on_expiry = False
        self._continue_ttl = None               # seconds a continue token lives (None: until compaction)
        self._continue_issued = {}              # token -> time.monotonic() it was issued
        self._silent = frozenset()              # resource ids (None: all) whose watches send nothing
        self._watch_started = collections.Counter()
        self._evictions = []                    # (namespace, name) of pods evicted, in order
        self._conn_lock = threading.Lock()
        self._conns = set()
        self._httpd = None
        self._thread = None
        self._control = None
        self._control_thread = None
        self._stopping = threading.Event()
        self._away = False

    # -- lifecycle -------------------------------------------------------
    def start(self):
        self._stopping.clear()
        self._listen()
        if self._control_port is not None:
            self._control = _ControlServer(("127.0.0.1", int(self._control_port)), self)
            self._control_port = self._control.server_address[1]
            self._control_thread = threading.Thread(target=self._control.serve_forever, kwargs={"poll_interval": 0.1},
                                                    name="fake-apiserver-control", daemon=True)
            self._control_thread.start()
        return self

    def _listen(self):
        self._httpd = _TLSServer((self.host, self._port), _ApiHandler, self)
        self._port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="fake-apiserver", daemon=True)
        self._thread.start()

    def _unlisten(self):
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
            self._thread.join(5)

    def _close_connections(self):
        with self._conn_lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with self.store.lock:
            for w in self.store.watchers:
                with w.cond:
                    w.drop_now = True
                    w.cond.notify_all()

    def stop(self):
        self._stopping.set()
        self._unlisten()
        self._close_connections()
        if self._control is not None:
            self._control.shutdown()
            self._control.server_close()
            self._control = None
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with self._conn_lock:
                if not self._conns:
                    break
            time.sleep(0.02)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def port(self):
        return self._port

    @property
    def url(self):
        return "https://%s:%d" % (self.host, self._port)

    @property
    def control_port(self):
        return self._control_port

    @property
    def control_url(self):
        return None if self._control_port is None else "http://127.0.0.1:%d" % self._control_port

    # -- go away / come back --------------------------------------------
    def go_away(self, drop_connections=True):
        """Closes the listening socket (connections are refused) and, by default, every open connection."""
        with self._lock:
            self._away = True
        self._unlisten()
        if drop_connections:
            self._close_connections()
        return True

    def come_back(self):
        """Listens again on the same port."""
        with self._lock:
            if not self._away:
                return False
            self._away = False
        deadline = time.monotonic() + 10
        while True:
            try:
                self._listen()
                return True
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def is_away(self):
        return self._away

    # -- resources -------------------------------------------------------
    @staticmethod
    def resource(name):
        """A Resource by plural ("components"), plural.group ("events.events.k8s.io") or Kind."""
        for r in RESOURCES:
            if name == r.id:
                return r
        for r in RESOURCES:
            if name == r.plural or name == r.kind:
                return r
        raise KeyError("unknown resource %r (known: %s)" % (name, ", ".join(r.id for r in RESOURCES)))

    def _ns_name(self, res, obj=None, name=None, namespace=None):
        md = (obj or {}).get("metadata") or {}
        name = name or md.get("name")
        ns = None
        if res.namespaced:
            ns = namespace or md.get("namespace") or "default"
        return ns, name

    # -- direct store operations (the test back door; watchers see them) -
    def create(self, resource, obj, namespace=None):
        """Creates obj (ApiError 409 if it exists). Keeps every field given, status included."""
        res = self.resource(resource)
        with self.store.lock:
            return copy.deepcopy(self._create(res, obj, namespace, keep_status=True))

    def put(self, resource, obj, namespace=None):
        """Creates or replaces obj without any precondition. Keeps every field given."""
        res = self.resource(resource)
        ns, name = self._ns_name(res, obj, namespace=namespace)
        with self.store.lock:
            if self.store.current(res, Store.key(res, ns, name or "")) is None:
                return copy.deepcopy(self._create(res, obj, ns, keep_status=True))
            return copy.deepcopy(self._update(res, obj, ns, name, mode="direct", check_rv=False))

    def update(self, resource, obj, namespace=None, check_resource_version=False):
        """Replaces obj (404 if missing; 409 if check_resource_version and it is stale). Keeps status."""
        res = self.resource(resource)
        ns, name = self._ns_name(res, obj, namespace=namespace)
        with self.store.lock:
            return copy.deepcopy(self._update(res, obj, ns, name, mode="direct", check_rv=check_resource_version))

    def update_status(self, resource, obj, namespace=None):
        """Replaces only .status, as PUT .../status does."""
        res = self.resource(resource)
        ns, name = self._ns_name(res, obj, namespace=namespace)
        with self.store.lock:
            return copy.deepcopy(self._update(res, obj, ns, name, mode="status", check_rv=False))

    def patch(self, resource, name, patch, namespace=None, patch_type="merge", subresource=None):
        """Applies a merge ("merge") or JSON ("json") patch, to the main resource or to "status"."""
        res = self.resource(resource)
        ns, _ = self._ns_name(res, None, name=name, namespace=namespace)
        ct = {"merge": "application/merge-patch+json", "json": "application/json-patch+json"}[patch_type]
        with self.store.lock:
            return copy.deepcopy(self._patch(res, ns, name, ct, patch, subresource == "status", direct=True))

    def delete(self, resource, name, namespace=None, missing_ok=True):
        """Deletes (or, with finalizers, marks for deletion). Returns the deleted object or None."""
        res = self.resource(resource)
        ns, _ = self._ns_name(res, None, name=name, namespace=namespace)
        with self.store.lock:
            try:
                return copy.deepcopy(self._delete(res, ns, name, None))
            except ApiError as e:
                if e.code == 404 and missing_ok:
                    return None
                raise

    def get(self, resource, name, namespace=None):
        """The current object or None."""
        res = self.resource(resource)
        ns, _ = self._ns_name(res, None, name=name, namespace=namespace)
        with self.store.lock:
            return copy.deepcopy(self.store.current(res, Store.key(res, ns, name)))

    def list(self, resource, namespace=None):
        res = self.resource(resource)
        with self.store.lock:
            items = self.store.state_at(res, self.store.rv)
            return [copy.deepcopy(o) for _, o in items
                    if namespace is None or o["metadata"].get("namespace") == namespace]

    def resource_version(self):
        """The current global resourceVersion (decimal string)."""
        with self.store.lock:
            return str(self.store.rv)

    def compact(self, resource_version=None):
        """Forgets history up to resource_version (default: now). Returns the compacted revision."""
        return str(self.store.compact(resource_version))

    def rewind(self, resource_version):
        """An etcd restore: the store goes back to its state at `resource_version` (history after it
        forgotten, later writes reuse the revisions after it) and every open watch is dropped, as the API
        server restarts. A client ahead of it gets, for a list or a watch at its resourceVersion, a 504
        "Too large resource version" after too_large_rv_wait (the watch cache waiting to catch up), until
        the revision passes it again. Returns the new resourceVersion."""
        rv = self.store.rewind(int(resource_version))
        with self.store.lock:
            watchers = list(self.store.watchers)
        for w in watchers:
            with w.cond:
                w.drop_now = True
                w.cond.notify_all()
        return str(rv)

    def compacted_resource_version(self):
        return str(self.store.compacted)

    # -- the store verbs, shared by HTTP and the back door ---------------
    def _prepare(self, res, obj, ns, name_from_url=None, api=False):
        if not isinstance(obj, dict):
            raise bad_request("the body must be a JSON object")
        obj = copy.deepcopy(obj)
        av, kind = obj.get("apiVersion"), obj.get("kind")
        if av and av != res.api_version:
            raise bad_request("the API version in the data (%s) does not match the expected API version (%s)"
                              % (av, res.api_version))
        if kind and kind != res.kind:
            raise bad_request("the kind in the data (%s) does not match the expected kind (%s)" % (kind, res.kind))
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        md = obj.get("metadata")
        if md is None:
            md = obj["metadata"] = {}
        if not isinstance(md, dict):
            raise bad_request("metadata must be an object")
        if res.namespaced:
            if md.get("namespace") and ns and md["namespace"] != ns:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            md["namespace"] = ns or md.get("namespace") or "default"
        else:
            md.pop("namespace", None)
        if name_from_url is not None and md.get("name") and md["name"] != name_from_url:
            raise bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                              % (md["name"], name_from_url))
        if name_from_url is not None:
            md["name"] = name_from_url
        if api and res.kind == "Namespace" and md.get("name"):
            md["labels"] = dict(md.get("labels") or {}, **{NAMESPACE_NAME_LABEL: md["name"]})
        if api and res.kind == "Secret":
            check_secret_data(obj)
            if not obj.get("type"):
                obj["type"] = "Opaque"         # SetDefaults_Secret
        if res.kind == "Secret" and isinstance(obj.get("stringData"), dict):   # write-only, merged into data
            data = obj.setdefault("data", {}) or {}
            for k, v in obj.pop("stringData").items():
                data[k] = base64.b64encode(str(v).encode()).decode()
            obj["data"] = data
        return obj

    def _create(self, res, obj, ns, keep_status, api=False, field_manager=None):
        """api: an API request (validation and the registry's create defaults); else the back door.
        field_manager: the writer's manager, owner of every field it set (an Update entry)."""
        obj = self._prepare(res, obj, ns, api=api)
        md = obj["metadata"]
        if not md.get("name"):
            if md.get("generateName"):
                md["name"] = md["generateName"] + "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
            else:
                raise invalid(res, "", "metadata.name", "Required value: name or generateName is required")
        name = md["name"]
        if not NAME_RE.match(name) or len(name) > 253:
            raise invalid(res, name, "metadata.name", "Invalid value: %r: a lowercase RFC 1123 subdomain "
                          "must consist of lower case alphanumeric characters, '-' or '.'" % name)
        if api:
            self._validate(res, obj, None)
        key = Store.key(res, md.get("namespace"), name)
        if self.store.current(res, key) is not None:
            raise ApiError(409, '%s "%s" already exists' % (_gr(res), name), "AlreadyExists",
                           {"name": name, "group": res.group, "kind": res.plural})
        if md.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now_rfc3339()
        md["generation"] = 1
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            md.pop(k, None)
        if res.has_status and not keep_status and res.group:
            obj.pop("status", None)       # CRD semantics: create ignores .status
        if api and res.kind == "Pod":     # podStrategy.PrepareForCreate
            obj["status"] = {"phase": "Pending", "qosClass": pod_qos_class(obj)}
        elif api and res.kind == "PodDisruptionBudget":   # status is the disruption controller's
            obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
        if field_manager is not None:
            track_update(res, None, obj, field_manager, None, md.get("managedFields"))
        return self._commit(res, key, "ADDED", obj, None)

    def _serviceaccounts_controller(self, namespace):
        """What kube-controller-manager's serviceaccounts controller does for a new namespace: its
        `default` ServiceAccount (pods that name none use it). Only while ServiceAccounts are served."""
        sa = next((r for r in RESOURCES if r.kind == "ServiceAccount" and not r.group), None)
        if sa is None or self.store.current(sa, Store.key(sa, namespace, "default")) is not None:
            return
        self._create(sa, {"apiVersion": "v1", "kind": "ServiceAccount",
                          "metadata": {"name": "default", "namespace": namespace}}, namespace, keep_status=False)

    @staticmethod
    def _validate(res, obj, old):
        """Raises 422 Invalid for what the API server's validation refuses (pods, events, secrets)."""
        md = obj["metadata"]
        if res.kind == "Event":
            errs = validate_event(obj, md.get("namespace") or "", res.group == "events.k8s.io", old)
        elif res.kind == "Secret":
            errs = validate_secret(obj, old)
        elif res.kind == "Pod":
            errs = validate_pod(obj, old)
        else:
            errs = []
        if errs:
            raise invalid_fields(res, md.get("name") or "", errs)

    @staticmethod
    def _spec_part(res, obj):
        return {k: v for k, v in obj.items()
                if k not in ("metadata", "apiVersion", "kind") and not (res.has_status and k == "status")}

    def _update(self, res, obj, ns, name, mode, check_rv, name_from_url=None, field_manager=None,
                managed_fields=_MISSING):
        """mode: "main" (HTTP main resource), "status" (status subresource), "direct" (back door).
        field_manager: record what changed as that manager's (an Update entry); managed_fields: an
        apply's managedFields, set as they are."""
        obj = self._prepare(res, obj, ns, name_from_url, api=mode != "direct")
        md = obj["metadata"]
        name = name or md.get("name")
        if not name:
            raise invalid(res, "", "metadata.name", "Required value: name is required")
        key = Store.key(res, md.get("namespace"), name)
        old = self.store.current(res, key)
        if old is None:
            raise not_found(res, name)
        if check_rv and md.get("resourceVersion") and md["resourceVersion"] != old["metadata"]["resourceVersion"]:
            raise conflict(res, name)
        if md.get("uid") and md["uid"] != old["metadata"]["uid"]:
            raise conflict(res, name, "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                           % (md["uid"], old["metadata"]["uid"]))
        if mode == "status":
            new = copy.deepcopy(old)
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
        elif mode == "ephemeralcontainers":       # pods/ephemeralcontainers: only spec.ephemeralContainers
            new = copy.deepcopy(old)
            eph = (obj.get("spec") or {}).get("ephemeralContainers") or []
            errs = validate_ephemeral_containers(eph, (old.get("spec") or {}).get("ephemeralContainers") or [])
            if errs:
                raise invalid_fields(res, name, errs)
            new.setdefault("spec", {})["ephemeralContainers"] = eph
            if not eph:
                new["spec"].pop("ephemeralContainers", None)
        else:
            new = obj
            nmd = new["metadata"]
            for k in ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds"):
                if k in old["metadata"]:
                    nmd[k] = old["metadata"][k]
                else:
                    nmd.pop(k, None)
            if mode == "main" and res.has_status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            if not _json_equal(self._spec_part(res, old), self._spec_part(res, new)):
                nmd["generation"] = int(old["metadata"].get("generation") or 0) + 1
            if mode == "main":
                self._validate(res, new, old)
        if managed_fields is not _MISSING:
            if managed_fields:
                new["metadata"]["managedFields"] = managed_fields
            else:
                new["metadata"].pop("managedFields", None)
        elif field_manager is not None:
            sub = mode if mode in ("status", "ephemeralcontainers") else None
            request_entries = new["metadata"].get("managedFields") if mode == "main" else None
            track_update(res, old, new, field_manager, sub, request_entries)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if _json_equal(new, old):
            return old                     # a no-op write does not bump resourceVersion
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            return self._commit(res, key, "DELETED", None, new, old)
        return self._commit(res, key, "MODIFIED", new, old)

    def _patch(self, res, ns, name, content_type, body, status, direct=False):
        key = Store.key(res, ns, name)
        old = self.store.current(res, key)
        if old is None:
            raise not_found(res, name)
        patched = self._patched(res, old, name, content_type, body)
        mode = "status" if status else ("direct" if direct else "main")
        return self._update(res, patched, ns, name, mode, check_rv=True)

    @staticmethod
    def _patched(res, old, name, content_type, body):
        """old with the patch applied (a precondition resourceVersion checked), resourceVersion = old's."""
        if content_type == "application/merge-patch+json":
            if not isinstance(body, dict):
                raise bad_request("merge patch must be a JSON object")
            patched = merge_patch(old, body)
        elif content_type == "application/json-patch+json":
            try:
                patched = json_patch(old, body)
            except PatchError as e:
                raise ApiError(422, str(e), "Invalid")
        else:
            raise ApiError(415, "the body of the request was in an unknown format - accepted media types "
                           "include: application/json-patch+json, application/merge-patch+json", "UnsupportedMediaType")
        if not isinstance(patched, dict):
            raise ApiError(422, "the patched object is not a JSON object", "Invalid")
        pmd = patched.get("metadata") or {}
        if pmd.get("name") != name:
            raise bad_request("the name of the object (%s) does not match the name on the URL (%s)" % (pmd.get("name"), name))
        if pmd.get("resourceVersion") and pmd["resourceVersion"] != old["metadata"]["resourceVersion"]:
            raise conflict(res, name)      # a resourceVersion in the patch is a precondition
        pmd["resourceVersion"] = old["metadata"]["resourceVersion"]
        return patched

    def _delete(self, res, ns, name, options):
        key = Store.key(res, ns, name)
        old = self.store.current(res, key)
        if old is None:
            raise not_found(res, name)
        pre = (options or {}).get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
            raise conflict(res, name, "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                           % (pre["uid"], old["metadata"]["uid"]))
        if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
            raise conflict(res, name, "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion "
                           "in object meta: %s" % (pre["resourceVersion"], old["metadata"]["resourceVersion"]))
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return old
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = now_rfc3339()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._commit(res, key, "MODIFIED", new, old)
        return self._commit(res, key, "DELETED", None, old)

    # -- pods/eviction (pkg/registry/core/pod/storage/eviction.go) --------
    def evictions(self):
        """(namespace, name) of every pod evicted through pods/eviction (not dry runs), in order."""
        with self._lock:
            return [list(e) for e in self._evictions]

    def _evict(self, ns, name, body, query):
        pods, pdb_res = self.resource("pods"), self.resource("poddisruptionbudgets.policy")
        if not isinstance(body, dict):
            raise bad_request("the body must be a JSON object")
        av, kind = body.get("apiVersion"), body.get("kind")
        if av and av not in ("policy/v1", "policy/v1beta1"):
            raise bad_request("the API version in the data (%s) does not match the expected API version (policy/v1)" % av)
        if kind and kind != "Eviction":
            raise bad_request("the kind in the data (%s) does not match the expected kind (Eviction)" % kind)
        md = body.get("metadata") or {}
        if not isinstance(md, dict):
            raise bad_request("metadata must be an object")
        if md.get("namespace") and md["namespace"] != ns:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        if (md.get("name") or "") != name:
            raise bad_request("name in URL does not match name in Eviction object")
        opts = body.get("deleteOptions") or {}
        if not isinstance(opts, dict):
            raise bad_request("deleteOptions must be an object")
        dry_opts = opts.get("dryRun") or []
        dry_query = [query["dryRun"]] if query.get("dryRun") else []
        if dry_opts and dry_query and dry_opts != dry_query:
            raise ApiError(500, "Non-matching dry-run options in request and content: %s and %s" % (dry_query, dry_opts))
        for v in dry_opts or dry_query:
            if v != "All":
                raise bad_request('dryRun: Unsupported value: "%s": supported values: "All"' % v)
        dry = bool(dry_opts or dry_query)
        pre = dict(opts.get("preconditions") or {})
        success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        with self.store.lock:
            pod = self.store.current(pods, Store.key(pods, ns, name))
            if pod is None:
                raise not_found(pods, name)
            phase = (pod.get("status") or {}).get("phase")
            deleting = bool(pod["metadata"].get("deletionTimestamp"))
            if phase in ("Succeeded", "Failed", "Pending") or deleting:     # canIgnorePDB
                if phase not in ("Succeeded", "Failed") and not deleting and not pre.get("resourceVersion"):
                    pre["resourceVersion"] = pod["metadata"]["resourceVersion"]    # shouldEnforceResourceVersion
                self._evict_delete(pods, ns, name, pre, dry)
                return success
            labels = pod["metadata"].get("labels") or {}
            budgets = [o for _, o in self.store.state_at(pdb_res, self.store.rv)
                       if o["metadata"].get("namespace") == ns
                       and selector_matches((o.get("spec") or {}).get("selector"), labels)]
            if len(budgets) > 1:        # a Status answer without a reason, turned into an error
                raise ApiError(500, "This pod has more than one PodDisruptionBudget, which the eviction "
                               "subresource does not support.", "")
            if budgets:
                pdb = budgets[0]
                st = pdb.get("status") or {}
                policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy")
                unready_ok = not pod_is_ready(pod) and (
                    policy == "AlwaysAllow" or
                    (int(st.get("currentHealthy") or 0) >= int(st.get("desiredHealthy") or 0)
                     and int(st.get("desiredHealthy") or 0) > 0))
                if unready_ok:          # no decrement; delete only if the pod has not changed since
                    pre["resourceVersion"] = pod["metadata"]["resourceVersion"]
                else:
                    self._check_and_decrement(pdb_res, pdb, name, dry)
            self._evict_delete(pods, ns, name, pre, dry)
            return success

    def _check_and_decrement(self, pdb_res, pdb, pod_name, dry):
        st = pdb.get("status") or {}
        pname = pdb["metadata"]["name"]
        observed = st.get("observedGeneration")
        if observed is not None and int(observed) < int(pdb["metadata"].get("generation") or 0):
            raise ApiError(429, "Cannot evict pod as it would violate the pod's disruption budget.", "TooManyRequests",
                           {"retryAfterSeconds": 10, "causes": [{"reason": "DisruptionBudget", "message":
                            "The disruption budget %s is still being processed by the server." % pname}]},
                           headers={"Retry-After": "10"})
        allowed = int(st.get("disruptionsAllowed") or 0)
        forbidden = None
        if allowed < 0:
            forbidden = "pdb disruptions allowed is negative"
        elif len(st.get("disruptedPods") or {}) > 2000:
            forbidden = "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        if forbidden:
            raise ApiError(403, 'poddisruptionbudget.policy "%s" is forbidden: %s' % (pname, forbidden), "Forbidden",
                           {"name": pname, "group": "policy", "kind": "poddisruptionbudget"})
        if allowed == 0:
            raise ApiError(429, "Cannot evict pod as it would violate the pod's disruption budget.", "TooManyRequests",
                           {"causes": [{"reason": "DisruptionBudget", "message":
                                        "The disruption budget %s needs %d healthy pods and has %d currently"
                                        % (pname, int(st.get("desiredHealthy") or 0),
                                           int(st.get("currentHealthy") or 0))}]})
        if dry:
            return
        new = copy.deepcopy(pdb)
        nst = new.setdefault("status", {})
        for f in ("currentHealthy", "desiredHealthy", "expectedPods"):
            nst.setdefault(f, 0)
        nst["disruptionsAllowed"] = allowed - 1
        if allowed - 1 == 0:            # pdbhelper.UpdateDisruptionAllowedCondition
            conds = nst.setdefault("conditions", [])
            cond = next((c for c in conds if c.get("type") == "DisruptionAllowed"), None)
            if cond is None:
                cond = {"type": "DisruptionAllowed", "lastTransitionTime": now_rfc3339()}
                conds.append(cond)
            elif cond.get("status") != "False":
                cond["lastTransitionTime"] = now_rfc3339()
            cond.update(status="False", reason="InsufficientPods", message=cond.get("message", ""),
                        observedGeneration=int(nst.get("observedGeneration") or 0))
        nst.setdefault("disruptedPods", {})[pod_name] = now_rfc3339()
        ns = pdb["metadata"].get("namespace")
        self.store.commit(pdb_res, Store.key(pdb_res, ns, pname), "MODIFIED", new, pdb)

    def _evict_delete(self, pods, ns, name, pre, dry):
        """addConditionAndDeletePod: the DisruptionTarget condition (a status write), then the delete."""
        key = Store.key(pods, ns, name)
        pod = self.store.current(pods, key)
        if pod is None:
            raise not_found(pods, name)
        if dry:
            self._check_delete_preconditions(pods, pod, name, pre)
            return
        uid, rv = pod["metadata"]["uid"], pod["metadata"]["resourceVersion"]
        if pre.get("uid") and pre["uid"] != uid:
            raise ApiError(409, 'Operation cannot be fulfilled on Pod "%s": the UID in the precondition (%s) does not '
                           'match the UID in record (%s). The object might have been deleted and then recreated'
                           % (name, pre["uid"], uid), "Conflict", {"name": name, "kind": "Pod"})
        if pre.get("resourceVersion") and pre["resourceVersion"] != rv:
            raise ApiError(409, 'Operation cannot be fulfilled on Pod "%s": the ResourceVersion in the precondition '
                           '(%s) does not match the ResourceVersion in record (%s). The object might have been '
                           'modified' % (name, pre["resourceVersion"], rv), "Conflict", {"name": name, "kind": "Pod"})
        new = copy.deepcopy(pod)
        conds = new.setdefault("status", {}).setdefault("conditions", [])
        want = {"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                "lastTransitionTime": now_rfc3339(), "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting"}
        i = next((j for j, c in enumerate(conds) if isinstance(c, dict) and c.get("type") == "DisruptionTarget"), None)
        if i is None:
            conds.append(want)
        else:
            if conds[i].get("status") == "True":
                want["lastTransitionTime"] = conds[i].get("lastTransitionTime")
            conds[i] = want
        if not _json_equal(new, pod):
            updated = self.store.commit(pods, key, "MODIFIED", new, pod)
            if pre.get("resourceVersion"):
                pre["resourceVersion"] = updated["metadata"]["resourceVersion"]
        self._delete(pods, ns, name, {"preconditions": pre})
        with self._lock:
            self._evictions.append((ns, name))

    @staticmethod
    def _check_delete_preconditions(res, old, name, pre):
        if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
            raise conflict(res, name, "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                           % (pre["uid"], old["metadata"]["uid"]))
        if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
            raise conflict(res, name, "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion "
                           "in object meta: %s" % (pre["resourceVersion"], old["metadata"]["resourceVersion"]))

    # -- planned writes: API writes are computed, admitted, then committed -
    def _commit(self, res, key, type_, obj, ev_old, expect=None):
        """Store.commit, or (in plan mode) records the write and returns what it would return."""
        expect = ev_old if expect is None else expect
        plan = getattr(self._plan, "writes", None)
        if plan is None:
            return self.store.commit(res, key, type_, obj, ev_old)
        plan.append((res, key, type_, obj, ev_old, expect))
        out = copy.deepcopy(obj if obj is not None else ev_old)
        if obj is not None and expect is None:
            out["metadata"].pop("resourceVersion", None)      # a dry-run create has no resourceVersion
        return out

    def _planned(self, fn):
        """Runs fn() (store lock held by the caller) recording its writes instead of committing them."""
        self._plan.writes = []
        try:
            out = fn()
            return out, self._plan.writes
        finally:
            self._plan.writes = None

    def _apply_plan(self, plan):
        """Commits planned writes if the objects they replace are still current; None if one is stale."""
        for res, key, _t, _o, _old, expect in plan:
            if self.store.current(res, key) is not expect:
                return None
        out = None
        for res, key, type_, obj, ev_old, _e in plan:
            out = self.store.commit(res, key, type_, obj, ev_old)
        return out

    # -- admission ---------------------------------------------------------
    def set_admission(self, enabled=True):
        """Turns the calling of admission webhooks on (the default) or off."""
        with self._lock:
            self._admission = bool(enabled)
        return self._admission

    def set_service_endpoints(self, endpoints=None):
        """{"ns/name": "host:port"} (or "ns/name:port"): where clientConfig.service webhooks are reached."""
        with self._lock:
            self._service_endpoints = dict(endpoints or {})
        return True

    def add_service_endpoint(self, service, endpoint):
        with self._lock:
            self._service_endpoints[service] = endpoint
        return True

    def add_user(self, token, username, groups=None, uid=None, extra=None):
        """Accepts token and names its requester in AdmissionReviews' userInfo."""
        info = {"username": username, "groups": list(groups if groups is not None else ["system:authenticated"])}
        if uid:
            info["uid"] = uid
        if extra:
            info["extra"] = extra
        with self._lock:
            self._users[token] = info
            self._tokens.add(token)
        return info

    def webhook_calls(self, since=0, name=None):
        """Every admission webhook call, in order: {name, configuration, type, uid, allowed, error, patched,
        warnings, operation, resource, subResource, namespace, objectName, dryRun, request_seq, request}.
        since: an index into this list (len(webhook_calls()) as a mark)."""
        with self._lock:
            return [copy.deepcopy(c) for c in self._webhook_calls[since:] if name is None or c["name"] == name]

    def _user_info(self, auth):
        parts = (auth or "").split(None, 1)
        token = parts[1].strip() if len(parts) == 2 and parts[0].lower() == "bearer" else None
        with self._lock:
            info = self._users.get(token)
        if info is not None:
            return copy.deepcopy(info)
        if token is None:
            return {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
        return {"username": "fake-apiserver-user", "groups": ["system:authenticated"]}

    def _admission_hooks(self, res):
        """(mutating, validating): [(configuration name, webhook)] in call order, or ([], []) when off."""
        with self._lock:
            on = self._admission
        if not on or res.plural in WEBHOOK_CONFIG_PLURALS and res.group == "admissionregistration.k8s.io":
            return [], []
        out = []
        with self.store.lock:
            for plural in WEBHOOK_CONFIG_PLURALS:
                r = self.resource(plural + ".admissionregistration.k8s.io")
                hooks = []
                for _, cfg in self.store.state_at(r, self.store.rv):   # sorted by name
                    for w in cfg.get("webhooks") or []:
                        if isinstance(w, dict) and w.get("name"):
                            hooks.append((cfg["metadata"]["name"], copy.deepcopy(w)))
                out.append(hooks)
        return out[0], out[1]

    def _namespace_labels(self, attrs, obj):
        """Labels the namespaceSelector is matched against, or None when it does not apply."""
        if attrs["resource"].plural == "namespaces" and not attrs["resource"].group:
            src = obj if attrs["operation"] != "DELETE" else attrs["old"]
            md = (src or {}).get("metadata") or {}
            return self._with_name_label(md.get("labels"), md.get("name"))
        if not attrs["namespace"]:
            return None                      # cluster-scoped: never exempted
        nsr = self.resource("namespaces")
        with self.store.lock:
            ns = self.store.current(nsr, Store.key(nsr, None, attrs["namespace"]))
        if ns is None:
            raise ApiError(404, 'namespaces "%s" not found' % attrs["namespace"], "NotFound",
                           {"name": attrs["namespace"], "kind": "namespaces"})
        return self._with_name_label((ns.get("metadata") or {}).get("labels"), attrs["namespace"])

    @staticmethod
    def _with_name_label(labels, name):
        """Every real namespace carries kubernetes.io/metadata.name (the API server sets it); back-door ones too here."""
        out = dict(labels or {})
        if name:
            out.setdefault(NAMESPACE_NAME_LABEL, name)
        return out

    def _should_call(self, hook, attrs, obj):
        """ShouldCallHook: namespaceSelector, objectSelector, rules (matchPolicy Equivalent = Exact here:
        the server serves one version of each resource)."""
        res = attrs["resource"]
        is_ns = res.plural == "namespaces" and not res.group
        if not any(isinstance(r, dict) and _rule_matches(r, attrs["operation"], attrs["gvr"][0], attrs["gvr"][1],
                                                         attrs["gvr"][2], attrs["sub"], attrs["namespace"], is_ns)
                   for r in hook.get("rules") or []):
            return False
        sel = hook.get("namespaceSelector")
        if not (sel is None or sel == {}):
            labels = self._namespace_labels(attrs, obj)
            if labels is not None and not selector_matches(sel, labels):
                return False
        osel = hook.get("objectSelector")
        if not (osel is None or osel == {}):
            def lab(o):
                return ((o or {}).get("metadata") or {}).get("labels") or {}
            if not ((obj is not None and selector_matches(osel, lab(obj))) or
                    (attrs["old"] is not None and selector_matches(osel, lab(attrs["old"])))):
                return False
        return True

    def _review(self, attrs, obj):
        g, v, r = attrs["gvr"]
        kind = {"group": attrs["gvk"][0], "version": attrs["gvk"][1], "kind": attrs["gvk"][2]}
        req = {"uid": str(uuid.uuid4()), "kind": kind, "resource": {"group": g, "version": v, "resource": r},
               "requestKind": dict(kind), "requestResource": {"group": g, "version": v, "resource": r},
               "operation": attrs["operation"], "userInfo": copy.deepcopy(attrs["user"]),
               "object": copy.deepcopy(obj), "oldObject": copy.deepcopy(attrs["old"]),
               "dryRun": bool(attrs["dry"]), "options": copy.deepcopy(attrs["options"])}
        if attrs["sub"]:
            req["subResource"] = req["requestSubResource"] = attrs["sub"]
        if attrs["name"]:
            req["name"] = attrs["name"]
        if attrs["namespace"]:
            req["namespace"] = attrs["namespace"]
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}

    def _call_hook(self, hook, review):
        """Calls one webhook. -> the AdmissionResponse (dict). Raises _CallError."""
        cc = hook.get("clientConfig") or {}
        timeout = hook.get("timeoutSeconds")
        timeout = int(timeout) if isinstance(timeout, int) and 1 <= timeout <= 30 else 10
        if "v1" not in (hook.get("admissionReviewVersions") or ["v1"]):
            raise _CallError("webhook does not accept v1 AdmissionReview")
        if cc.get("url"):
            u = urllib.parse.urlsplit(cc["url"])
            if u.scheme != "https" or not u.hostname:
                raise _CallError('Post "%s": unsupported URL (https only)' % cc["url"])
            server_name, port = u.hostname, u.port or 443
            connect = (server_name, port)
            path = u.path or "/"
            query = (u.query + "&" if u.query else "") + "timeout=%ds" % timeout
            shown = "https://%s%s?%s" % (u.netloc, path, query)
            host_header = u.netloc
        elif isinstance(cc.get("service"), dict):
            svc = cc["service"]
            sns, sname = svc.get("namespace") or "", svc.get("name") or ""
            port = int(svc.get("port") or 443)
            path = svc.get("path") or "/"
            server_name = "%s.%s.svc" % (sname, sns)
            shown = "https://%s:%d%s?timeout=%ds" % (server_name, port, path, timeout)
            host_header = "%s:%d" % (server_name, port)
            with self._lock:
                ep = self._service_endpoints.get("%s/%s:%d" % (sns, sname, port)) or \
                    self._service_endpoints.get("%s/%s" % (sns, sname))
            if not ep:
                raise _CallError('failed to call webhook: Post "%s": dial tcp: lookup %s: no such host'
                                 % (shown, server_name))
            h, _, p = ep.rpartition(":")
            connect = (h.strip("[]") or "127.0.0.1", int(p))
            query = "timeout=%ds" % timeout
        else:
            raise _CallError("could not get REST client: no clientConfig url or service")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ca = cc.get("caBundle")
        if ca:
            try:
                ctx.load_verify_locations(cadata=base64.b64decode(ca, validate=True).decode("ascii"))
            except (ValueError, binascii.Error, ssl.SSLError, UnicodeDecodeError):
                raise _CallError("could not get REST client: unable to load root certificates: "
                                 "unable to parse bytes as PEM block")
        else:
            ctx.load_default_certs()      # system roots, as the API server does without a caBundle
        body = dumps(review)
        try:
            code, data = _post_webhook(connect, server_name, ctx, path + "?" + query, host_header, body, timeout)
        except _CallError as e:
            raise _CallError('failed to call webhook: Post "%s": %s' % (shown, e))
        if not 200 <= code < 300:        # the REST client's error for a non-2xx answer
            try:
                st = json.loads(data.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                st = None
            if isinstance(st, dict) and st.get("kind") == "Status" and st.get("message"):
                raise _CallError("failed to call webhook: %s" % st["message"])
            raise _CallError("failed to call webhook: the server responded with the status code %d but did not "
                             "return more information (post %s)" % (code, shown))
        try:
            out = json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise _CallError("received invalid webhook response: %s" % e)
        if not isinstance(out, dict) or out.get("apiVersion") != "admission.k8s.io/v1" or \
                out.get("kind") != "AdmissionReview":
            got = out if isinstance(out, dict) else {}
            raise _CallError("received invalid webhook response: expected webhook response of admission.k8s.io/v1, "
                             "Kind=AdmissionReview, got %s, Kind=%s"
                             % (got.get("apiVersion"), got.get("kind")))
        resp = out.get("response")
        if not isinstance(resp, dict):
            raise _CallError("received invalid webhook response: webhook response was absent")
        if resp.get("uid") != review["request"]["uid"]:
            raise _CallError('received invalid webhook response: expected response.uid="%s", got "%s"'
                             % (review["request"]["uid"], resp.get("uid")))
        return resp

    def _record_call(self, attrs, cfg, hook, kind, review, allowed, error=None, patched=False, warnings=(),
                     patch_returned=False, response=None):
        rec = {"name": hook.get("name"), "configuration": cfg, "type": kind,
               "uid": review["request"]["uid"], "allowed": allowed, "error": error, "patched": patched,
               "patch_returned": patch_returned, "response": copy.deepcopy(response),
               "warnings": list(warnings), "operation": attrs["operation"], "resource": attrs["gvr"][2],
               "subResource": attrs["sub"] or "", "namespace": attrs["namespace"] or "",
               "objectName": attrs["name"] or "", "dryRun": bool(attrs["dry"]),
               "request_seq": attrs["entry"]["seq"] if attrs["entry"] else None,
               "request": copy.deepcopy(review["request"])}
        with self._lock:
            self._webhook_calls.append(rec)
            if attrs["entry"] is not None:
                attrs["entry"].setdefault("admission", []).append(
                    {k: rec[k] for k in ("name", "type", "uid", "allowed", "error", "patched")})
                attrs["entry"].setdefault("warnings", []).extend(warnings)

    def _invoke(self, cfg, hook, kind, attrs, obj):
        """Calls a matched webhook (callAttrMutatingHook / callHook). -> the object, patched by a mutating
        webhook. Raises the ApiError to answer; a failed call with failurePolicy Ignore returns obj."""
        name = hook.get("name")
        review = self._review(attrs, obj)
        resp, new, sent = None, obj, False
        try:
            if attrs["dry"]:
                if hook.get("sideEffects") is None:
                    raise _CallError("Webhook SideEffects is nil")
                if hook.get("sideEffects") not in SIDE_EFFECTS_DRY_RUN_OK:
                    raise bad_request('admission webhook "%s" does not support dry run' % name)
            sent = True
            resp = self._call_hook(hook, review)
            if kind == "mutating" and resp.get("allowed") is True and resp.get("patch"):
                try:
                    ops = json.loads(base64.b64decode(resp["patch"], validate=True))
                    if not isinstance(ops, list):
                        raise ValueError("a JSON patch is an array")
                except (ValueError, TypeError, binascii.Error) as e:
                    raise _CallError("received undecodable patch in webhook response: %s" % e)
                if ops:
                    if obj is None:
                        raise ApiError(500, 'Internal error occurred: admission webhook "%s" attempted to modify '
                                       'the object, which is not supported for this operation' % name,
                                       "InternalError")
                    if resp.get("patchType") != "JSONPatch":
                        raise _CallError('unsupported patch type "%s"' % (resp.get("patchType") or ""))
                    try:
                        new = _apply_json_patch(copy.deepcopy(obj), ops)
                    except Exception as e:     # a patch that does not apply: internal error whatever the policy
                        raise ApiError(500, "Internal error occurred: %s" % e, "InternalError")
                    if not isinstance(new, dict):
                        raise ApiError(500, "Internal error occurred: the patched object is not an object",
                                       "InternalError")
        except _CallError as e:
            msg = 'failed calling webhook "%s": %s' % (name, e)
            if sent:
                self._record_call(attrs, cfg, hook, kind, review, None, error=msg,
                                  warnings=self._warnings(resp), patch_returned=bool((resp or {}).get("patch")),
                                  response=resp)
            if hook.get("failurePolicy") == "Ignore":
                return obj
            raise ApiError(500, "Internal error occurred: " + msg, "InternalError", {"causes": [{"message": msg}]})
        except ApiError as e:
            if sent:
                self._record_call(attrs, cfg, hook, kind, review, None, error=e.message,
                                  warnings=self._warnings(resp), patch_returned=bool((resp or {}).get("patch")),
                                  response=resp)
            raise
        allowed = resp.get("allowed") is True
        self._record_call(attrs, cfg, hook, kind, review, allowed, patched=new is not obj and not _json_equal(new, obj),
                          warnings=self._warnings(resp), patch_returned=bool(resp.get("patch")), response=resp)
        if not allowed:
            raise _denied_error(name, resp.get("status"))
        return new

    @staticmethod
    def _warnings(resp):
        return [w for w in ((resp or {}).get("warnings") or []) if isinstance(w, str)]

    def _mutate(self, attrs, hooks):
        """Mutating webhooks in order, JSONPatch applied, reinvocationPolicy IfNeeded once. -> object."""
        obj = attrs["obj"]
        previously, reinvoke = set(), set()
        for round_ in (0, 1):
            if round_ == 1:
                if not reinvoke:
                    break
                todo, reinvoke = reinvoke, set()
            for i, (cfg, hook) in enumerate(hooks):
                if round_ == 1 and i not in todo:
                    continue         # a reinvocation never calls a webhook for the first time
                if not self._should_call(hook, attrs, obj):
                    continue
                new = self._invoke(cfg, hook, "mutating", attrs, obj)
                if new is not obj and not _json_equal(new, obj):
                    obj = new
                    reinvoke |= previously
                if hook.get("reinvocationPolicy") == "IfNeeded":
                    previously.add(i)
        return obj

    def _validate_hooks(self, attrs, hooks, obj):
        """Validating webhooks: every matching one is called (in parallel); the first failure in order wins."""
        matched = [(cfg, hook) for cfg, hook in hooks if self._should_call(hook, attrs, obj)]
        if not matched:
            return
        errors = [None] * len(matched)

        def one(i, cfg, hook):
            try:
                self._invoke(cfg, hook, "validating", attrs, obj)
            except ApiError as e:
                errors[i] = e
        threads = [threading.Thread(target=one, args=(i, c, h), daemon=True) for i, (c, h) in enumerate(matched)]
        for t in threads:
            t.start()
        for i, t in enumerate(threads):
            t.join(40)       # each call is bounded by its timeoutSeconds (<= 30)
            if t.is_alive() and errors[i] is None:     # never an allow by default
                errors[i] = ApiError(500, 'Internal error occurred: failed calling webhook "%s": no answer'
                                     % matched[i][1].get("name"), "InternalError")
        for e in errors:
            if e is not None:
                raise e

    def _attrs(self, res, op, ns, name, sub, obj, old, dry, options, entry, gvk=None):
        if res.plural == "namespaces" and not res.group:
            ns = name or ((obj or {}).get("metadata") or {}).get("name")
        return {"resource": res, "operation": op, "namespace": ns, "name": name, "sub": sub,
                "gvr": (res.group, res.version, res.plural), "gvk": gvk or (res.group, res.version, res.kind),
                "obj": obj, "old": old, "dry": dry, "options": options,
                "user": entry.get("user") if entry else None, "entry": entry}

    @staticmethod
    def _dry_run(query, opts_dry=None):
        vals = []
        if query.get("dryRun"):
            vals.append(query["dryRun"])
        if opts_dry:
            vals.extend(opts_dry if isinstance(opts_dry, list) else [opts_dry])
        for v in vals:
            if v != "All":
                raise bad_request('dryRun: Unsupported value: "%s": supported values: "All"' % v)
        return bool(vals)

    @staticmethod
    def _options(kind, dry, query, extra=None):
        o = {"apiVersion": "meta.k8s.io/v1", "kind": kind}
        if dry:
            o["dryRun"] = ["All"]
        if query.get("fieldManager"):
            o["fieldManager"] = query["fieldManager"]
        o.update(extra or {})
        return o

    @staticmethod
    def _field_manager(query, entry):
        """The manager of a non-apply write: the fieldManager query, else the user agent's prefix."""
        return query.get("fieldManager") or manager_from_user_agent((entry or {}).get("user_agent"))

    def _api_create(self, res, ns, body, query, entry, applied=False):
        """applied: body is an apply's result for a missing object (its managedFields made)."""
        dry = self._dry_run(query)
        manager = None if applied else self._field_manager(query, entry)
        mutating, validating = self._admission_hooks(res)
        with self.store.lock:
            obj = self._prepare(res, body, ns, api=True)
        md = obj["metadata"]
        attrs = self._attrs(res, "CREATE", md.get("namespace"), md.get("name") or "", None, obj, None, dry,
                            self._options("CreateOptions", dry, query), entry)
        obj = self._mutate(attrs, mutating)
        with self.store.lock:
            created, plan = self._planned(lambda: self._create(res, obj, ns, keep_status=not res.group, api=True,
                                                               field_manager=manager))
        attrs.update(obj=created, name=created["metadata"]["name"])
        if res.plural == "namespaces" and not res.group:
            attrs["namespace"] = attrs["name"]
        self._validate_hooks(attrs, validating, created)
        if dry:
            return created
        with self.store.lock:
            out = self._apply_plan(plan)
            if out is not None and res.kind == "Namespace" and not res.group:
                self._serviceaccounts_controller(out["metadata"]["name"])
        if out is None:
            name = created["metadata"]["name"]
            raise ApiError(409, '%s "%s" already exists' % (_gr(res), name), "AlreadyExists",
                           {"name": name, "group": res.group, "kind": res.plural})
        return out

    def _api_write_existing(self, res, ns, name, sub, op, query, entry, make, run, options, gvk=None):
        """UPDATE (PUT/PATCH) or DELETE of a stored object, through admission, retried on a concurrent write.
        make(old) -> the object for the mutating webhooks (None for DELETE); run(obj) -> the verb's result."""
        dry = options.get("dryRun") == ["All"]
        mutating, validating = self._admission_hooks(res)
        key = Store.key(res, ns, name)
        for _ in range(8):
            with self.store.lock:
                old = self.store.current(res, key)
                if old is None:
                    raise not_found(res, name)
                obj = make(old)
            attrs = self._attrs(res, op, ns, name, sub, obj, old, dry, options, entry, gvk)
            obj = self._mutate(attrs, mutating)
            with self.store.lock:
                if self.store.current(res, key) is not old:
                    continue                     # written meanwhile: admit again on the new state
                result, plan = self._planned(lambda: run(obj))
            final = result if op != "DELETE" else None     # DELETE: object null, oldObject the stored one
            attrs["obj"] = final
            self._validate_hooks(attrs, validating, final)
            if dry or not plan:
                return result
            with self.store.lock:
                out = self._apply_plan(plan)
            if out is not None:
                return out
        raise conflict(res, name)

    def _api_update(self, res, ns, name, sub, body, query, entry):
        dry = self._dry_run(query)
        mode = "status" if sub == "status" else ("ephemeralcontainers" if sub == "ephemeralcontainers" else "main")
        with self.store.lock:
            self._prepare(res, body, ns, name, api=True)      # a malformed body is 400 before any lookup

        def make(old):
            return self._prepare(res, body, ns, name, api=True)

        def run(obj):
            return self._update(res, obj, ns, name, mode, check_rv=True, name_from_url=name,
                                field_manager=self._field_manager(query, entry))
        return self._api_write_existing(res, ns, name, sub, "UPDATE", query, entry, make, run,
                                        self._options("UpdateOptions", dry, query))

    def _api_patch(self, res, ns, name, sub, ct, patch, query, entry):
        dry = self._dry_run(query)
        mode = "status" if sub == "status" else ("ephemeralcontainers" if sub == "ephemeralcontainers" else "main")
        apply = ct == APPLY_PATCH
        force = _truthy(query.get("force"))

        def make(old):
            if apply:
                return apply_config(res, old, self._apply_body(res, ns, name, patch), query["fieldManager"],
                                    force, sub)
            return self._patched(res, old, name, ct, patch)

        def run(obj):
            if apply:
                return self._update(res, obj, ns, name, mode, check_rv=True,
                                    managed_fields=obj["metadata"].get("managedFields"))
            return self._update(res, obj, ns, name, mode, check_rv=True,
                                field_manager=self._field_manager(query, entry))
        return self._api_write_existing(res, ns, name, sub, "UPDATE", query, entry, make, run,
                                        self._options("PatchOptions", dry, query))

    def _apply_body(self, res, ns, name, config):
        """An apply configuration checked as the object it names (apiVersion, kind, namespace, name)."""
        with self.store.lock:
            obj = self._prepare(res, config, ns, name)
        obj["metadata"].pop("resourceVersion", None)
        return obj

    def _api_apply(self, res, ns, name, sub, body, query, entry):
        """PATCH application/apply-patch+yaml: server-side apply; creates the object when it is missing
        (the main resource only: a subresource answers 404). -> (code, object)"""
        config = decode_apply_body(body)
        self._apply_body(res, ns, name, config)           # a malformed configuration is 400 before any lookup
        with self.store.lock:
            exists = self.store.current(res, Store.key(res, ns, name)) is not None
        if not exists and sub is None:
            created = apply_config(res, None, self._apply_body(res, ns, name, config), query["fieldManager"],
                                   _truthy(query.get("force")), None)
            for k in ("uid", "resourceVersion", "creationTimestamp", "generation"):
                created["metadata"].pop(k, None)
            return 201, self._api_create(res, ns, created, query, entry, applied=True)
        return 200, self._api_patch(res, ns, name, sub, APPLY_PATCH, config, query, entry)

    def _api_delete(self, res, ns, name, opts, query, entry):
        opts = opts if isinstance(opts, dict) else {}
        dry = self._dry_run(query, opts.get("dryRun"))
        options = dict(opts)
        options.update(apiVersion="meta.k8s.io/v1", kind="DeleteOptions")
        if dry:
            options["dryRun"] = ["All"]
        return self._api_write_existing(res, ns, name, None, "DELETE", query, entry, lambda old: None,
                                        lambda obj: self._delete(res, ns, name, opts), options)

    def _api_evict(self, ns, name, body, query, entry):
        """pods/eviction: a CREATE of an Eviction (policy/v1) through admission, then the eviction."""
        pods = self.resource("pods")
        mutating, validating = self._admission_hooks(pods)
        if (mutating or validating) and isinstance(body, dict):
            opts = body.get("deleteOptions") if isinstance(body.get("deleteOptions"), dict) else {}
            dry = self._dry_run(query, opts.get("dryRun"))
            obj = copy.deepcopy(body)
            obj.setdefault("apiVersion", "policy/v1")
            obj.setdefault("kind", "Eviction")
            attrs = self._attrs(pods, "CREATE", ns, name, "eviction", obj, None, dry,
                                self._options("CreateOptions", dry, query), entry,
                                gvk=("policy", obj["apiVersion"].split("/")[-1], "Eviction"))
            body = self._mutate(attrs, mutating)
            attrs["obj"] = body
            self._validate_hooks(attrs, validating, body)
        return self._evict(ns, name, body, query)


    # -- faults and settings ---------------------------------------------
    def _add_rule(self, table, **kw):
        with self._lock:
            self._rule_ids += 1
            rule = Rule(self._rule_ids, **kw)
            table.append(rule)
            return rule.id

    def inject_fault(self, status, method=None, path=None, query=None, watch=None, count=1,
                     retry_after=None, message=None, reason=None):
        """The next `count` requests (None: every one) matching method, path regex (re.search on the path),
        query regex (on the raw query string) and watch (True/False/None) get `status` with a Status body
        (429/503 with a Retry-After header when retry_after is given). status="close": the connection is
        closed without an answer. Returns the rule id."""
        if status != "close":
            status = int(status)
        return self._add_rule(self._faults, method=method, path=path, query=query, watch=watch, count=count,
                              status=status, retry_after=retry_after, message=message, reason=reason)

    def clear_faults(self, rule_id=None):
        with self._lock:
            self._faults[:] = [r for r in self._faults if rule_id is not None and r.id != rule_id]
        return True

    def faults(self):
        with self._lock:
            return [r.describe() for r in self._faults]

    def add_delay(self, seconds, method=None, path=None, query=None, watch=None, count=None, answer=False):
        """Delays matching requests by `seconds` before answering (count: None = every one); clearing the
        rule releases the requests it holds at once (so a test can hold one until it has looked).
        answer=True: the request is carried out at once (a write is stored, watchers see it) and only its
        answer is held: a client that times out meanwhile has had its write landed."""
        return self._add_rule(self._delays, method=method, path=path, query=query, watch=watch, count=count,
                              seconds=float(seconds), released=threading.Event(), answer=bool(answer))

    def clear_delays(self, rule_id=None):
        with self._lock:
            # A rule whose count is used up has left the table but may still hold requests.
            cleared = [r for r in self._delays + self._holding if rule_id is None or r.id == rule_id]
            self._delays[:] = [r for r in self._delays if r not in cleared]
        for r in cleared:
            r.extra["released"].set()
        return True

    def _hold(self, rule):
        """A delay rule's wait: its seconds, or until cleared. True when the server is stopping."""
        deadline = time.monotonic() + rule.extra["seconds"]
        with self._lock:
            self._holding.append(rule)
        try:
            while not rule.extra["released"].is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if self._stopping.wait(min(left, 0.05)):
                    return True
            return self._stopping.is_set()
        finally:
            with self._lock:
                self._holding.remove(rule)

    def reset_faults(self):
        """Clears faults, delays, watch drops, silence, continue TTL; chunking back to "event"; 410 as an
        ERROR event."""
        self.clear_faults()
        self.clear_delays()
        self.clear_watch_drops()
        self.set_watch_chunking("event")
        self.set_watch_expired_mode("event")
        self.set_continue_expired_token(False)
        self.set_continue_ttl(None)
        with self._lock:
            self._silent = frozenset()
        return True

    def set_watch_chunking(self, mode="event", seed=0, max_chunk=8192, coalesce_window=0.05):
        """How watch bytes are cut into HTTP chunks: "event" (one event per chunk, like the API server),
        "byte" (one byte per chunk), "random" (random boundaries mid-JSON and across events, sizes up to
        max_chunk), "coalesce" (every event available within coalesce_window seconds in one chunk)."""
        if mode not in ("event", "byte", "random", "coalesce"):
            raise ValueError("mode must be event, byte, random or coalesce")
        with self._lock:
            self._chunking = {"mode": mode, "max_chunk": max(1, int(max_chunk)),
                              "coalesce_window": float(coalesce_window), "rng": random.Random(seed)}
        return True

    def drop_watches(self, resource=None, after_events=None, mid_event=False, future=False, rst=False):
        """Abruptly closes (no terminating chunk) open watches on `resource` (None: all): now, or after
        each has sent `after_events` more data events (bookmarks not counted); mid_event: first send half
        of the next event. future=True: also every watch opened later (until clear_watch_drops).
        rst: reset the TCP connection instead of closing it. Returns how many open watches were hit."""
        res = self.resource(resource) if resource else None
        n = 0
        with self.store.lock:
            for w in self.store.watchers:
                if res is not None and w.res is not res:
                    continue
                with w.cond:
                    if after_events is None:
                        w.drop_now = True
                    else:
                        w.drop_after = int(after_events)
                    w.drop_mid_event, w.drop_rst = bool(mid_event), bool(rst)
                    w.cond.notify_all()
                n += 1
        if future:
            with self._lock:
                self._drop_future = {"res": res, "after": int(after_events or 0), "mid": bool(mid_event),
                                     "rst": bool(rst)}
        return n

    def clear_watch_drops(self):
        with self._lock:
            self._drop_future = None
        return True

    def set_watch_expired_mode(self, mode="event"):
        """How a watch from a compacted resourceVersion fails: "event" (200, an ERROR event with a 410
        Expired Status, as the API server does) or "http" (an HTTP 410 answer)."""
        if mode not in ("event", "http"):
            raise ValueError("mode must be event or http")
        self._watch_expired_mode = mode
        return True

    def set_continue_expired_token(self, enabled=False):
        """enabled: an expired continue answers with the newer message and an inconsistent continue token
        in the Status's metadata.continue (as API servers since 1.12 do)."""
        self._continue_token_on_expiry = bool(enabled)
        return True

    def set_continue_ttl(self, seconds=None):
        """Continue tokens expire `seconds` after they were issued: the next page answers 410 Expired, as
        when etcd compacts while a slow client pages through a large list (every 5 minutes on a real
        cluster). 0: every token has expired by the time it comes back. None: only compaction expires them."""
        self._continue_ttl = None if seconds is None else float(seconds)
        return True

    def set_watch_silence(self, resource=None, enabled=True, future=True):
        """Watches of `resource` (None: every resource) stay open but send nothing: no event, no bookmark,
        not the end at timeoutSeconds (a hung proxy, a dead connection whose peer never says so). `future`:
        the open ones and every one opened later (until enabled=False); False: only the ones open now (a
        connection that died: a new one works). Events are held, not lost; enabled=False lets them through.
        A client that closes the connection meanwhile ends the stream on the server too."""
        key = None if resource is None else self.resource(resource).id
        if future or not enabled:
            with self._lock:   # replaced whole: read without a lock (under a watcher's cond)
                self._silent = (self._silent | {key}) if enabled else (self._silent - {key})
        with self.store.lock:
            watchers = [w for w in self.store.watchers if key is None or w.res.id == key]
        for w in watchers:
            with w.cond:
                w.silenced = bool(enabled) and not future
                w.cond.notify_all()
        return True

    def _is_silent(self, w):
        silent = self._silent
        return getattr(w, "silenced", False) or None in silent or w.res.id in silent

    def set_bookmark_interval(self, seconds=1.0):
        """Seconds between BOOKMARK events on watches that allow them (None: only the final one)."""
        self.bookmark_interval = None if seconds is None else float(seconds)
        return True

    def set_tokens(self, tokens=()):
        """Extra accepted bearer tokens, besides the token file's contents."""
        with self._lock:
            self._tokens = set(tokens)
        return True

    def add_token(self, token, ttl=None):
        """Accepts bearer `token`; for `ttl` seconds from now only, when given (then 401, as an expired
        token gets from the API server)."""
        with self._lock:
            self._tokens.add(token)
            if ttl is None:
                self._token_expiry.pop(token, None)
            else:
                self._token_expiry[token] = time.monotonic() + float(ttl)
        return True

    def revoke_token(self, token):
        """Refuses bearer `token` from now on (401)."""
        with self._lock:
            self._tokens.discard(token)
            self._token_expiry.pop(token, None)
            self._revoked.add(token)
        return True

    def deny_client_cn(self, cn):
        """Refuses client certificates whose subject CN is `cn` from now on (401)."""
        with self._lock:
            self._denied_cns.add(cn)
        return True

    # -- observation -----------------------------------------------------
    def request_mark(self):
        """An index for `since`: only requests logged after this call."""
        with self._lock:
            return len(self._log)

    def clear_requests(self):
        with self._lock:
            self._log = []
        return True

    @staticmethod
    def _entry_matches(e, method, path, query, status, watch, header):
        if method and e["method"] != method.upper():
            return False
        if path and not re.search(path, e["path"]):
            return False
        if query and not re.search(query, e["query_string"]):
            return False
        if status is not None and e["status"] != status:
            return False
        if watch is not None and e["watch"] != bool(watch):
            return False
        if header:
            hname, hre = header
            val = e["headers_lower"].get(hname.lower())
            if val is None or not re.search(hre, val):
                return False
        return True

    def requests(self, since=0, method=None, path=None, query=None, status=None, watch=None, header=None):
        """Logged requests (dicts: seq, time, method, path, query_string, query, headers, status, watch,
        resource), optionally filtered like wait_for_request."""
        with self._lock:
            return [self._public(e) for e in self._log[since:]
                    if self._entry_matches(e, method, path, query, status, watch, header)]

    @staticmethod
    def _public(e):
        d = dict(e)
        d.pop("headers_lower", None)
        return d

    def wait_for_request(self, method=None, path=None, query=None, status=None, watch=None, header=None,
                         since=0, timeout=5.0):
        """Waits (bounded) for a logged request matching: method, path regex, raw-query regex, answered
        status (None: any, even not yet answered), watch flag, header (name, value regex). Returns the entry;
        raises TimeoutError listing the last requests."""
        deadline = time.monotonic() + float(timeout)
        with self._log_cond:
            while True:
                for e in self._log[since:]:
                    if self._entry_matches(e, method, path, query, status, watch, header):
                        return self._public(e)
                left = deadline - time.monotonic()
                if left <= 0:
                    recent = ["%s %s?%s -> %s" % (e["method"], e["path"], e["query_string"], e["status"])
                              for e in self._log[-10:]]
                    raise TimeoutError("no request matching method=%s path=%s query=%s status=%s within %.1fs; "
                                       "last requests: %s" % (method, path, query, status, timeout, recent))
                self._log_cond.wait(min(left, 0.5))

    def open_watches(self, resource=None):
        """Open watch streams: a count for one resource, else a dict resource id -> count."""
        with self.store.lock:
            counts = collections.Counter(w.res.id for w in self.store.watchers)
        if resource:
            return counts.get(self.resource(resource).id, 0)
        return dict(counts)

    def watches_started(self, resource=None):
        """How many watch streams have been started (200 sent), per resource or in all."""
        with self._lock:
            if resource:
                return self._watch_started.get(self.resource(resource).id, 0)
            return sum(self._watch_started.values())

    def wait_for_watch(self, resource, timeout=5.0, min_open=1, started_after=None):
        """Waits (bounded) until at least min_open watches on resource are open and, if started_after is
        given, more than started_after watches on it have been started. Returns the open count."""
        res = self.resource(resource)
        deadline = time.monotonic() + float(timeout)
        with self.store.changed:
            while True:
                n = sum(1 for w in self.store.watchers if w.res is res)
                started = self._watch_started.get(res.id, 0)
                if n >= min_open and (started_after is None or started > started_after):
                    return n
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("watches on %s: %d open (wanted %d), %d started (wanted > %s) after %.1fs"
                                       % (res.id, n, min_open, started, started_after, timeout))
                self.store.changed.wait(min(left, 0.2))

    def wait_for_watches_closed(self, resource=None, timeout=5.0):
        res = self.resource(resource) if resource else None
        deadline = time.monotonic() + float(timeout)
        with self.store.changed:
            while True:
                n = sum(1 for w in self.store.watchers if res is None or w.res is res)
                if n == 0:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("%d watches still open after %.1fs" % (n, timeout))
                self.store.changed.wait(min(left, 0.2))

    # -- HTTP handling ---------------------------------------------------
    def _read_body(self, h):
        te = (h.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            parts = []
            while True:
                line = h.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while h.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(h.rfile.read(size))
                h.rfile.readline(65537)
            return b"".join(parts)
        n = int(h.headers.get("Content-Length") or 0)
        return h.rfile.read(n) if n > 0 else b""

    def _send(self, h, code, body, content_type="application/json", headers=None, entry=None):
        hold, h.ig_hold_answer = getattr(h, "ig_hold_answer", None), None
        if hold is not None and self._hold(hold):      # add_delay(answer=True): done, answered late
            h.close_connection = True
            return
        if isinstance(body, (dict, list)):
            body = dumps(body)
        if entry is not None:
            self._set_status(entry, code)
        h.send_response(code)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Cache-Control", "no-cache, private")
        h.send_header("Audit-Id", str(uuid.uuid4()))
        for k, v in (headers or {}).items():
            h.send_header(k, str(v))
        seen = set()
        for w in (entry or {}).get("warnings") or []:       # admission webhooks' warnings
            if w not in seen:
                seen.add(w)
                h.send_header("Warning", _warning_value(w))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)

    def _send_error(self, h, err, entry):
        self._send(h, err.code, err.status(), headers=err.headers, entry=entry)

    def _set_status(self, entry, code):
        with self._log_cond:
            entry["status"] = code
            self._log_cond.notify_all()

    def _match_rules(self, table, method, path, raw_query, is_watch):
        with self._lock:
            for rule in table:
                if rule.matches(method, path, raw_query, is_watch):
                    if rule.count is not None:
                        rule.count -= 1
                        if rule.count <= 0:
                            table.remove(rule)
                    return rule
        return None

    @staticmethod
    def _client_cn(conn):
        """The subject CN of the connection's verified client certificate, or None."""
        try:
            cert = conn.getpeercert()
        except (AttributeError, ValueError, OSError):
            return None
        if not cert:
            return None
        for rdn in cert.get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    return value
        return ""

    def _token_ok(self, auth, client_cn=None):
        if client_cn is not None:
            # x509 first, as the API server's union authenticator: a verified client certificate
            # authenticates the request (unless its CN was denied).
            with self._lock:
                return client_cn not in self._denied_cns
        with self._lock:
            accepted = set(self._tokens)
            now = time.monotonic()
            accepted -= {t for t, until in self._token_expiry.items() if now >= until}
            # Tokens that expired or were revoked still mean "tokens are required".
            anyone = not self._tokens and not self._token_expiry and not self._revoked
        if self.token_file:
            try:
                with open(self.token_file, "r", encoding="utf-8") as f:
                    t = f.read().strip()
                if t:
                    accepted.add(t)
            except OSError:
                pass
        if anyone and not self.token_file:
            return True
        parts = (auth or "").split(None, 1)
        if len(parts) != 2 or parts[0].lower() != "bearer":     # the scheme is case-insensitive, as in k8s
            return False
        return parts[1].strip() in accepted

    def _handle(self, h):
        split = urllib.parse.urlsplit(h.path)
        path, raw_query = split.path, split.query
        try:
            query = {k: v[-1] for k, v in urllib.parse.parse_qs(raw_query, keep_blank_values=True).items()}
        except ValueError:
            query = {}
        is_watch = h.command == "GET" and _truthy(query.get("watch"))
        headers = {k: v for k, v in h.headers.items()}
        entry = {"seq": 0, "time": time.time(), "method": h.command, "path": path, "query_string": raw_query,
                 "query": query, "headers": headers, "headers_lower": {k.lower(): v for k, v in headers.items()},
                 "status": None, "watch": is_watch, "user_agent": h.headers.get("User-Agent"),
                 "authorization": h.headers.get("Authorization")}
        with self._log_cond:
            entry["seq"] = len(self._log)
            self._log.append(entry)
            self._log_cond.notify_all()
        try:
            body = self._read_body(h)
        except (ValueError, OSError):
            h.close_connection = True
            self._set_status(entry, 0)
            return
        delay = self._match_rules(self._delays, h.command, path, raw_query, is_watch)
        h.ig_hold_answer = delay if delay is not None and delay.extra.get("answer") else None
        if delay is not None and h.ig_hold_answer is None and self._hold(delay):
            h.close_connection = True
            return
        fault = self._match_rules(self._faults, h.command, path, raw_query, is_watch)
        if fault is not None:
            st = fault.extra["status"]
            if st == "close":
                self._set_status(entry, 0)
                h.close_connection = True
                try:
                    h.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            hdrs, details = {}, None
            if fault.extra.get("retry_after") is not None:
                hdrs["Retry-After"] = str(int(fault.extra["retry_after"]))
                details = {"retryAfterSeconds": int(fault.extra["retry_after"])}
            if st == 500:
                details = dict(details or {}, causes=[{"message": "injected fault"}])
            msg = fault.extra.get("message") or DEFAULT_MESSAGES.get(st, "injected fault")
            return self._send_error(h, ApiError(st, msg, fault.extra.get("reason"), details, hdrs), entry)
        try:
            self._route(h, path, query, body, is_watch, entry)
        except ApiError as e:
            self._send_error(h, e, entry)

    def _route(self, h, path, query, body, is_watch, entry):
        public = path in ("/healthz", "/livez", "/readyz", "/version")
        auth = h.headers.get("Authorization")
        client_cn = self._client_cn(h.connection)
        entry["client_cn"] = client_cn
        if (not public or auth or client_cn is not None) and not self._token_ok(auth, client_cn):
            raise ApiError(401, "Unauthorized", "Unauthorized")
        entry["user"] = self._user_info(auth) if client_cn is None else {
            "username": client_cn, "groups": ["system:authenticated"]}
        accept = h.headers.get("Accept")
        if accept and not any(t.strip().split(";")[0] in ("application/json", "*/*", "application/*", "")
                              for t in accept.split(",")):
            raise ApiError(406, "only the following media types are accepted: application/json", "NotAcceptable")
        if path in ("/healthz", "/livez", "/readyz"):
            return self._send(h, 200, b"ok", "text/plain; charset=utf-8", entry=entry)
        if path == "/version":
            return self._send(h, 200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0-fake",
                                       "gitCommit": "0" * 40, "gitTreeState": "clean",
                                       "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.22.0",
                                       "compiler": "gc", "platform": "linux/amd64"}, entry=entry)
        disc = self._discovery(path)
        if disc is not None:
            if h.command != "GET":
                raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
            return self._send(h, 200, disc, entry=entry)
        res, ns, name, sub, watch_path = self._parse_path(path)
        if watch_path and h.command == "GET":
            is_watch = True
            entry["watch"] = True
        if res is None:
            raise ApiError(404, DEFAULT_MESSAGES[404], "NotFound", {"causes": [
                {"reason": "UnexpectedServerResponse", "message": "404 page not found"}]})
        method = h.command
        if sub == "eviction" and res.kind == "Pod" and name is not None and ns is not None:
            if method != "POST":
                raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
            return self._send(h, 201, self._api_evict(ns, name, self._json_body(h, body), query, entry),
                              entry=entry)
        ephemeral = sub == "ephemeralcontainers" and res.kind == "Pod" and not res.group
        if sub is not None and (not (sub == "status" and res.has_status or ephemeral) or name is None):
            raise ApiError(404, DEFAULT_MESSAGES[404], "NotFound")
        if name is None:
            if method == "GET" and is_watch:
                return self._serve_watch(h, res, ns, None, query, entry)
            if method == "GET":
                return self._send(h, 200, self._list(res, ns, query), entry=entry)
            if method == "POST":
                if res.namespaced and ns is None:
                    raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
                obj = self._json_body(h, body)
                return self._send(h, 201, self._api_create(res, ns, obj, query, entry), entry=entry)
            if method == "DELETE":
                return self._send(h, 200, self._delete_collection(res, ns, query, entry), entry=entry)
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        if method == "GET" and is_watch:
            return self._serve_watch(h, res, ns, name, query, entry)
        if method == "GET":
            with self.store.lock:
                obj = self.store.current(res, Store.key(res, ns, name))
            if obj is None:
                raise not_found(res, name)
            return self._send(h, 200, obj, entry=entry)
        if method == "PUT":
            obj = self._json_body(h, body)
            return self._send(h, 200, self._api_update(res, ns, name, sub, obj, query, entry), entry=entry)
        if method == "PATCH":
            ct = (h.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if ct not in ("application/merge-patch+json", "application/json-patch+json", APPLY_PATCH):
                raise ApiError(415, "the body of the request was in an unknown format - accepted media types "
                               "include: application/json-patch+json, application/merge-patch+json, "
                               "application/apply-patch+yaml", "UnsupportedMediaType")
            self._check_patch_options(ct, query)
            if ct == APPLY_PATCH:
                code, out = self._api_apply(res, ns, name, sub, body, query, entry)
                return self._send(h, code, out, entry=entry)
            try:
                patch = json.loads(body.decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as e:
                raise bad_request("error decoding patch: %s" % e)
            return self._send(h, 200, self._api_patch(res, ns, name, sub, ct, patch, query, entry), entry=entry)
        if method == "DELETE":
            if sub:
                raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
            opts = None
            if (h.headers.get("Content-Type") or "").split(";")[0].strip().lower() == PROTOBUF:
                try:
                    opts = decode_protobuf(body) if body else None
                except ProtobufError as e:
                    raise bad_request("error decoding DeleteOptions: %s" % e)
            elif body.strip():
                try:
                    opts = json.loads(body)
                except ValueError as e:
                    raise bad_request("error decoding DeleteOptions: %s" % e)
            return self._send(h, 200, self._api_delete(res, ns, name, opts, query, entry), entry=entry)
        raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")

    @staticmethod
    def _check_patch_options(ct, query):
        """ValidatePatchOptions (apimachinery's metav1 validation): 422 as the API server answers."""
        errs = []
        if ct != APPLY_PATCH:
            if "force" in query:
                errs.append(field_forbidden("force", "may not be specified for non-apply patch"))
        elif not query.get("fieldManager"):
            errs.append(field_required("fieldManager", "is required for apply patch"))
        fm = query.get("fieldManager") or ""
        if len(fm) > 128:
            errs.append(("FieldValueTooLong", "fieldManager", "Too long: may not be more than 128 bytes"))
        elif any(not c.isprintable() for c in fm):
            errs.append(field_invalid("fieldManager", fm, "may only contain printable characters"))
        if errs:
            rendered = ["%s: %s" % (f, m) for _, f, m in errs]
            agg = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
            raise ApiError(422, 'PatchOptions.meta.k8s.io "" is invalid: ' + agg, "Invalid",
                           {"group": "meta.k8s.io", "kind": "PatchOptions",
                            "causes": [{"reason": r, "message": m, "field": f} for r, f, m in errs]})

    @staticmethod
    def _json_body(h, body):
        ct = (h.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
        if ct == PROTOBUF:
            try:
                return decode_protobuf(body)
            except ProtobufError as e:
                raise bad_request("the body of the request could not be decoded: %s" % e)
        if ct not in ("application/json", ""):
            raise ApiError(415, 'the body of the request was in an unknown format - accepted media types include: '
                           'application/json, application/vnd.kubernetes.protobuf', "UnsupportedMediaType")
        try:
            return json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise bad_request("the body of the request could not be decoded: %s" % e)

    @staticmethod
    def _parse_path(path):
        """-> (resource, namespace, name, subresource, deprecated /watch/ path) or (None, ...)."""
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
        for namespaced_form in (True, False):    # /api/v1/namespaces/NS/events before /api/v1/namespaces/NAME
            for res in RESOURCES:
                pre = res.prefix.strip("/").split("/")
                if parts[:len(pre)] != pre:
                    continue
                rest = parts[len(pre):]
                watch_path = rest[:1] == ["watch"]
                if watch_path:                     # deprecated /watch/ paths
                    rest = rest[1:]
                ns = None
                if namespaced_form:
                    if not (res.namespaced and len(rest) >= 3 and rest[0] == "namespaces" and rest[2] == res.plural):
                        continue
                    ns, rest = rest[1], rest[2:]
                if not rest or rest[0] != res.plural or len(rest) > 3:
                    continue
                name = rest[1] if len(rest) >= 2 else None
                sub = rest[2] if len(rest) >= 3 else None
                return res, ns, name, sub, watch_path
        return None, None, None, None, False

    @staticmethod
    def _discovery(path):
        p = path.rstrip("/")
        if p == "/api":
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if p == "/apis":
            groups = collections.OrderedDict()
            for r in RESOURCES:
                if r.group:
                    groups.setdefault(r.group, set()).add(r.version)
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": g + "/" + v, "version": v} for v in sorted(vs)],
                 "preferredVersion": {"groupVersion": g + "/" + sorted(vs)[0], "version": sorted(vs)[0]}}
                for g, vs in groups.items()]}
        for r in RESOURCES:
            if p == r.prefix:
                out = []
                for s in RESOURCES:
                    if s.prefix == r.prefix:
                        out.append({"name": s.plural, "singularName": s.kind.lower(), "namespaced": s.namespaced,
                                    "kind": s.kind, "verbs": ["create", "delete", "deletecollection", "get", "list",
                                                              "patch", "update", "watch"]})
                        if s.has_status:
                            out.append({"name": s.plural + "/status", "singularName": "", "namespaced": s.namespaced,
                                        "kind": s.kind, "verbs": ["get", "patch", "update"]})
                        if s.kind == "Pod":
                            out.append({"name": "pods/eviction", "singularName": "", "namespaced": True,
                                        "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
                return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": r.api_version,
                        "resources": out}
            if r.group and p == "/apis/" + r.group:
                return {"kind": "APIGroup", "apiVersion": "v1", "name": r.group,
                        "versions": [{"groupVersion": r.api_version, "version": r.version}],
                        "preferredVersion": {"groupVersion": r.api_version, "version": r.version}}
        return None

    # -- LIST --------------------------------------------------------------
    @staticmethod
    def _parse_rv(value):
        if not re.fullmatch(r"[0-9]+", value or ""):
            raise bad_request('invalid resourceVersion "%s"' % value)
        return int(value)

    def _wait_fresh(self, rv):
        """Like the watch cache: wait (bounded) for a resourceVersion not yet reached, then 504."""
        deadline = time.monotonic() + self.too_large_rv_wait
        with self.store.changed:
            while self.store.rv < rv:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ApiError(504, "Timeout: Too large resource version: %d, current: %d" % (rv, self.store.rv),
                                   "Timeout", {"causes": [{"reason": "ResourceVersionTooLarge",
                                                           "message": "Too large resource version"}],
                                               "retryAfterSeconds": 1})
                self.store.changed.wait(min(left, 0.2))

    def _encode_continue(self, rv, start):
        # Standard base64 with padding: the token contains '+' (from the "~~~" field at offset 6), so a
        # client that does not URL-encode its query parameters sends a space and gets 400.
        raw = '{"p":"~~~","v":"meta.k8s.io/v1","rv":%d,"start":%s}' % (rv, json.dumps(start))
        return base64.b64encode(raw.encode()).decode()

    @staticmethod
    def _decode_continue(token):
        try:
            data = json.loads(base64.b64decode(token.encode(), validate=True))
            rv, start = int(data["rv"]), data["start"]
            if data.get("v") != "meta.k8s.io/v1" or not isinstance(start, str):
                raise ValueError("unsupported version")
            return rv, start
        except (ValueError, KeyError, TypeError, binascii.Error) as e:
            raise bad_request("continue key is not valid: %s" % e)

    def _list(self, res, ns, query):
        flt = Filter(res, ns, query.get("labelSelector"), query.get("fieldSelector"))
        limit = query.get("limit")
        if limit is not None and limit != "":
            if not re.fullmatch(r"-?[0-9]+", limit):
                raise bad_request('invalid limit "%s"' % limit)
            limit = int(limit)
            if limit <= 0:
                limit = None
        else:
            limit = None
        cont = query.get("continue") or None
        rv_param = query.get("resourceVersion")
        match = query.get("resourceVersionMatch") or None
        if match is not None and match not in ("Exact", "NotOlderThan"):
            raise bad_request('resourceVersionMatch: Unsupported value: "%s": supported values: "Exact", "NotOlderThan"'
                              % match)
        start_after = ""
        if cont:
            if rv_param not in (None, ""):
                raise bad_request("specifying resource version is not allowed when using continue")
            if match:
                raise bad_request("resourceVersionMatch is forbidden when continue is provided")
            snap, start_after = self._decode_continue(cont)
            ttl_expired = False
            if self._continue_ttl is not None:
                with self._lock:
                    issued = self._continue_issued.get(cont)
                ttl_expired = issued is None or time.monotonic() - issued >= self._continue_ttl
            with self.store.lock:
                if snap < self.store.compacted or ttl_expired:
                    meta = None
                    msg = CONTINUE_EXPIRED_MESSAGE
                    if self._continue_token_on_expiry:
                        meta = {"continue": self._encode_continue(self.store.rv, start_after)}
                        msg = CONTINUE_EXPIRED_MESSAGE_WITH_TOKEN
                    raise expired(msg, meta)
        elif rv_param in (None, ""):
            if match:
                raise bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
            snap = None
        else:
            want = self._parse_rv(rv_param)
            if want == 0 and match != "Exact":
                # Served from the watch cache, which ignores the limit: one answer, no continue token.
                limit = None
            exact = match == "Exact" or (match is None and limit is not None and want != 0)
            if match == "Exact" and want == 0:
                raise bad_request('resourceVersionMatch "Exact" is forbidden for resourceVersion "0"')
            if want > 0:
                self._wait_fresh(want)
            if exact:
                with self.store.lock:
                    if want < self.store.compacted:
                        raise expired("The resourceVersion for the provided list is too old.")
                snap = want
            else:
                snap = None
        with self.store.lock:
            if snap is None:
                snap = self.store.rv
            state = self.store.state_at(res, snap)
            first = bisect.bisect_right(state, start_after, key=lambda kv: kv[0]) if start_after else 0
            if flt.has_selectors or flt.namespace is not None:
                items = [(k, o) for k, o in state[first:] if flt.matches(o)]
                total = len(items)
                if limit is not None:
                    items = items[:limit + 1]
            else:
                total = len(state) - first
                items = state[first:first + limit + 1] if limit is not None else state[first:]
        meta = {"resourceVersion": str(snap)}
        if limit is not None and len(items) > limit:
            remaining = total - limit
            items = items[:limit]
            meta["continue"] = self._encode_continue(snap, items[-1][0] + "\x00")
            if self._continue_ttl is not None:
                with self._lock:
                    if len(self._continue_issued) > 10000:
                        self._continue_issued.clear()
                    self._continue_issued[meta["continue"]] = time.monotonic()
            if not flt.has_selectors:
                meta["remainingItemCount"] = remaining
        out_items = []
        for _, o in items:
            if not self.items_type_meta:
                o = {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
            out_items.append(o)
        return {"kind": res.kind + "List", "apiVersion": res.api_version, "metadata": meta, "items": out_items}

    def _delete_collection(self, res, ns, query, entry=None):
        """Deletes what the selectors match, each one a DELETE through admission."""
        flt = Filter(res, ns, query.get("labelSelector"), query.get("fieldSelector"))
        dry = self._dry_run(query)
        with self.store.lock:
            targets = [(o["metadata"].get("namespace"), o["metadata"]["name"])
                       for _, o in self.store.state_at(res, self.store.rv) if flt.matches(o)]
        deleted = []
        for ons, oname in targets:
            try:
                deleted.append(self._api_delete(res, ons, oname, {"dryRun": ["All"]} if dry else None, {}, entry))
            except ApiError as e:
                if e.code != 404:
                    raise
        with self.store.lock:
            return {"kind": res.kind + "List", "apiVersion": res.api_version,
                    "metadata": {"resourceVersion": str(self.store.rv)}, "items": deleted}

    # -- WATCH -------------------------------------------------------------
    def _bookmark_line(self, res, rv, initial_end=False):
        md = {"resourceVersion": str(rv)}
        if initial_end:
            md["annotations"] = {"k8s.io/initial-events-end": "true"}
        return dumps({"type": "BOOKMARK", "object": {"kind": res.kind, "apiVersion": res.api_version,
                                                     "metadata": md}}) + b"\n"

    def _serve_watch(self, h, res, ns, name, query, entry):
        flt = Filter(res, ns, query.get("labelSelector"), query.get("fieldSelector"), name)
        allow_bm = _truthy(query.get("allowWatchBookmarks"))
        t = query.get("timeoutSeconds")
        if t not in (None, ""):
            if not re.fullmatch(r"[0-9]+", t):
                raise bad_request('invalid timeoutSeconds "%s"' % t)
            timeout = float(t) if int(t) > 0 else self.default_watch_timeout
        else:
            timeout = self.default_watch_timeout
        rv_param = query.get("resourceVersion") or ""
        send_initial = query.get("sendInitialEvents")
        match = query.get("resourceVersionMatch") or None
        if send_initial is not None and send_initial != "":
            send_initial = _truthy(send_initial)
            if match != "NotOlderThan":
                raise bad_request('resourceVersionMatch: Forbidden: sendInitialEvents requires setting '
                                  'resourceVersionMatch to NotOlderThan')
        else:
            send_initial = None
            if match:
                raise bad_request("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")
        want = self._parse_rv(rv_param) if rv_param not in ("",) else None
        if want:
            self._wait_fresh(want)
        w = Watcher(self, res, flt, allow_bm, timeout, h.client_address)
        with self.store.lock:
            if send_initial is True or (send_initial is None and (want is None or want == 0)):
                for _, o in self.store.state_at(res, self.store.rv):
                    if flt.matches(o):
                        w.queue.append(dumps({"type": "ADDED", "object": o}) + b"\n")
                if send_initial and allow_bm:
                    w.queue.append(self._bookmark_line(res, self.store.rv, True))
            elif send_initial is False and want in (None, 0):
                pass
            else:
                if want < self.store.compacted:
                    err = make_status(410, "too old resource version: %d (%d)" % (want, self.store.compacted), "Expired")
                    if self._watch_expired_mode == "http":
                        raise ApiError(410, err["message"], "Expired")
                    w = None
                else:
                    i = bisect.bisect_right(self.store.event_rvs, want)
                    for ev in self.store.events[i:]:
                        if ev.res is res:
                            w.offer(ev)
            if w is not None:
                self.store.watchers.add(w)
                fut = self._drop_future
                if fut is not None and (fut["res"] is None or fut["res"] is res):
                    if fut["after"] <= 0:
                        w.drop_now = True
                    else:
                        w.drop_after = fut["after"]
                    w.drop_mid_event, w.drop_rst = fut["mid"], fut["rst"]
                self.store.changed.notify_all()
        self._set_status(entry, 200)
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.send_header("Cache-Control", "no-cache, private")
        h.end_headers()
        with self._lock:
            self._watch_started[res.id] += 1
        if w is None:
            self._write_chunk(h, dumps({"type": "ERROR", "object": err}) + b"\n")
            h.wfile.write(b"0\r\n\r\n")
            return
        try:
            self._watch_loop(h, w)
        except _Abort:
            self._abort(h, w)
        except (OSError, ssl.SSLError):
            h.close_connection = True
        finally:
            with self.store.lock:
                self.store.watchers.discard(w)
                self.store.changed.notify_all()

    def _abort(self, h, w):
        h.close_connection = True
        sock = h.connection
        try:
            if w.drop_rst:   # linger 0: the close that follows resets the connection
                raw = socket.socket(fileno=os.dup(sock.fileno()))
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                raw.close()
            else:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    @staticmethod
    def _write_chunk(h, data):
        if data:
            h.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")

    def _write_lines(self, h, lines):
        if not lines:
            return
        with self._lock:
            mode, max_chunk, rng = self._chunking["mode"], self._chunking["max_chunk"], self._chunking["rng"]
            if mode == "random":
                data = b"".join(lines)
                sizes = []
                i = 0
                while i < len(data):
                    r = rng.random()
                    n = rng.randint(1, 8) if r < 0.4 else (rng.randint(1, 300) if r < 0.8 else rng.randint(1, max_chunk))
                    sizes.append(n)
                    i += n
        if mode == "event":
            for line in lines:
                self._write_chunk(h, line)
        elif mode == "coalesce":
            self._write_chunk(h, b"".join(lines))
        elif mode == "byte":
            data = b"".join(lines)
            h.wfile.write(b"".join(b"1\r\n" + data[i:i + 1] + b"\r\n" for i in range(len(data))))
        else:
            i = 0
            for n in sizes:
                self._write_chunk(h, data[i:i + n])
                i += n

    def _hold_silent(self, h, w):
        """While w's resource is silenced: send nothing; end when the client closes the connection (a
        watch client sends nothing more, so a readable socket means it closed). True if it was silent."""
        if not self._is_silent(w):
            return False
        while self._is_silent(w):
            with w.cond:
                if w.drop_now or self._stopping.is_set():
                    raise _Abort()
            try:
                readable, _, _ = select.select([h.connection], [], [], 0.1)
            except (OSError, ValueError):
                raise _Abort()
            if readable:
                raise _Abort()
        return True

    def _watch_loop(self, h, w):
        deadline = w.started + w.timeout
        interval = self.bookmark_interval
        next_bm = time.monotonic() + interval if (w.allow_bookmarks and interval) else None
        while True:
            if self._hold_silent(h, w):
                next_bm = time.monotonic() + interval if next_bm is not None and interval else next_bm
            final = False
            with w.cond:
                while True:
                    now = time.monotonic()
                    if w.queue or w.drop_now or self._stopping.is_set() or self._is_silent(w):
                        break
                    if now >= deadline or (next_bm is not None and now >= next_bm):
                        break
                    wake = deadline if next_bm is None else min(deadline, next_bm)
                    w.cond.wait(max(0.0, wake - now))
                if w.drop_now or self._stopping.is_set():
                    raise _Abort()
            if self._is_silent(w):
                continue
            now = time.monotonic()
            bookmark = None
            if now >= deadline:
                final = True
            if now >= deadline or (next_bm is not None and now >= next_bm):
                if w.allow_bookmarks:
                    with self.store.lock:        # every event up to store.rv is already queued
                        with w.cond:
                            lines = list(w.queue)
                            w.queue.clear()
                        bookmark = self._bookmark_line(w.res, self.store.rv)
                else:
                    with w.cond:
                        lines = list(w.queue)
                        w.queue.clear()
                if next_bm is not None:
                    interval = self.bookmark_interval
                    next_bm = (now + interval) if interval else None
            else:
                with w.cond:
                    lines = list(w.queue)
                    w.queue.clear()
                if self._chunking["mode"] == "coalesce" and lines:
                    self._stopping.wait(self._chunking["coalesce_window"])
                    with w.cond:
                        lines.extend(w.queue)
                        w.queue.clear()
            # drops after K data events
            drop_at = None
            with w.cond:
                if w.drop_after is not None:
                    data_idx = 0
                    for i, line in enumerate(lines):
                        if not line.startswith(b'{"type":"BOOKMARK"'):
                            if data_idx >= w.drop_after:
                                drop_at = i
                                break
                            data_idx += 1
                    if drop_at is None:
                        w.drop_after -= data_idx
                        if w.drop_after <= 0 and not w.drop_mid_event:
                            drop_at = len(lines)
            if drop_at is not None:
                self._write_lines(h, lines[:drop_at])
                if w.drop_mid_event and drop_at < len(lines):
                    half = lines[drop_at][:max(1, len(lines[drop_at]) // 2)]
                    self._write_chunk(h, half)
                raise _Abort()
            if bookmark is not None:
                lines.append(bookmark)
            self._write_lines(h, lines)
            w.events_sent += len(lines)
            if final:
                h.wfile.write(b"0\r\n\r\n")
                return


# ---------------------------------------------------------------------------
# Command line.

def _write_file_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="A test Kubernetes API server (HTTPS)")
    ap.add_argument("--tls-cert", required=True)
    ap.add_argument("--tls-key", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--token-file")
    ap.add_argument("--client-ca", help="accept client certificates signed by this CA (x509 authentication)")
    ap.add_argument("--control-port", type=int)
    ap.add_argument("--control-port-file")
    ap.add_argument("--bookmark-interval", type=float, default=1.0)
    ap.add_argument("--watch-timeout", type=float, default=1800.0,
                    help="server-side watch timeout when the client gives no timeoutSeconds")
    ap.add_argument("--max-history", type=int, default=None,
                    help="keep about this many events, compacting older ones (default: keep all)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--no-admission", action="store_true",
                    help="never call the stored webhook configurations' admission webhooks")
    ap.add_argument("--service-endpoint", action="append", default=[], metavar="NS/NAME=HOST:PORT",
                    help="where a clientConfig.service webhook is reached (repeatable)")
    args = ap.parse_args(argv)
    endpoints = {}
    for spec in args.service_endpoint:
        svc, sep, ep = spec.partition("=")
        if not sep or "/" not in svc or ":" not in ep:
            ap.error("--service-endpoint wants NS/NAME=HOST:PORT, got %r" % spec)
        endpoints[svc] = ep
    if args.control_port_file and args.control_port is None:
        args.control_port = 0
    srv = FakeApiServer(args.tls_cert, args.tls_key, token_file=args.token_file, host=args.host, port=args.port,
                        control_port=args.control_port, bookmark_interval=args.bookmark_interval,
                        default_watch_timeout=args.watch_timeout, max_history=args.max_history,
                        verbose=args.verbose, admission=not args.no_admission, service_endpoints=endpoints,
                        client_ca=args.client_ca)
    srv.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    if args.port_file:
        _write_file_atomic(args.port_file, "%d\n" % srv.port)
    if args.control_port_file:
        _write_file_atomic(args.control_port_file, "%d\n" % srv.control_port)
    print("fake-apiserver listening url=%s control=%s" % (srv.url, srv.control_url or "-"), flush=True)
    while not done.wait(0.5):
        pass
    srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
