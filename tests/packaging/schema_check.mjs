// Validates Kubernetes objects against the Kubernetes JSON schemas of the npm
// packages kubernetes-models, @kubernetes-models/cert-manager and
// @kubernetes-models/prometheus-operator (scripts/install-k8s-tools.sh puts
// them, at exact versions, in .tools/node_modules).
//
//   node tests/packaging/schema_check.mjs < objects.json
//
// stdin: one JSON array of objects (or one object). stdout: one JSON array,
// per object {index, apiVersion, kind, name, model, errors}, where every error
// is one line "<path>: <what is wrong>", e.g.
// "spec.template.spec.containers[0].imagePullPolicyy: unknown field (not in the
// schema of kubernetes-models/apps/v1/Deployment)". Exit 0: every object is
// valid; 1: some object is not (or has no model); 2: bad input or setup.
//
// Each object is checked with its model's validate() (the models' schemas are
// compiled ajv validators: types, required fields, enums, formats). Those
// schemas leave additionalProperties open, so validate() alone accepts any
// unknown field. Unknown fields are found by handing validate() the object
// wrapped in Proxies that record which properties the compiled validator reads:
// it reads every property its schema declares (and walks every key of a map),
// so a key of an object that the validator inspected but never read is not in
// the schema. An object the validator never looks into (a free-form field,
// e.g. a RawExtension) is not checked for unknown keys. The compiled validators
// leave out a few declared properties that need no check (e.g. "description"
// and "x-kubernetes-*" of JSONSchemaProps): a key the validator did not read is
// still known when the model's TypeScript declaration of the type (found from
// the _schemas/<Type>.js file that read the object) declares it.
//
// IG_NODE_MODULES names the node_modules directory (default: .tools/node_modules
// of this checkout).

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const nodeModules = process.env.IG_NODE_MODULES || path.resolve(here, "..", "..", ".tools", "node_modules");

// apiVersion group -> package that has its models (first match wins).
const PACKAGES = [
  { pkg: "kubernetes-models", groups: (g) => !g.includes(".") || g.endsWith(".k8s.io") },
  { pkg: "@kubernetes-models/cert-manager", groups: (g) => g === "cert-manager.io" || g.endsWith(".cert-manager.io") },
  { pkg: "@kubernetes-models/prometheus-operator", groups: (g) => g === "monitoring.coreos.com" },
];

function fail(message) {
  process.stderr.write("schema_check: " + message + "\n");
  process.exit(2);
}

// A path in the tests' notation: a.b[0].c, and ["app.kubernetes.io/name"] for
// keys that are not plain identifiers.
function joinPath(base, key) {
  if (typeof key === "number") return `${base}[${key}]`;
  if (!/^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(key)) return `${base}[${JSON.stringify(key)}]`;
  return base ? `${base}.${key}` : key;
}

// ajv's instancePath ("/spec/containers/0/name", "~1" for "/" in a key) in the
// tests' notation, walking `data` to tell array indices from keys.
function instancePathToPath(instancePath, data) {
  let out = "";
  let node = data;
  if (!instancePath) return "<root>";
  for (const raw of instancePath.split("/").slice(1)) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(node) && /^[0-9]+$/.test(key)) {
      out = joinPath(out, Number(key));
      node = node[Number(key)];
    } else {
      out = joinPath(out, key);
      node = node && typeof node === "object" ? node[key] : undefined;
    }
  }
  return out;
}

async function loadModel(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z0-9]+$/.test(kind)) return null;
  const slash = apiVersion.indexOf("/");
  const group = slash < 0 ? "" : apiVersion.slice(0, slash);
  const version = slash < 0 ? apiVersion : apiVersion.slice(slash + 1);
  for (const { pkg, groups } of PACKAGES) {
    if (!groups(group)) continue;
    const dir = group ? path.join(nodeModules, pkg, group, version) : path.join(nodeModules, pkg, version);
    const file = path.join(dir, kind + ".js");
    if (!fs.existsSync(file)) continue;
    const mod = await import(pathToFileURL(file).href);
    const model = mod[kind];
    // Only a top-level kind, whose apiVersion/kind are fixed by the model.
    if (typeof model === "function" && model.apiVersion === apiVersion && model.kind === kind) {
      return { model, name: `${pkg}/${group ? group + "/" : ""}${version}/${kind}` };
    }
  }
  return null;
}

// The _schemas/<Type>.js file of the innermost validator on the stack.
function readingSchema() {
  const saved = Error.stackTraceLimit;
  Error.stackTraceLimit = 6;
  const stack = new Error().stack || "";
  Error.stackTraceLimit = saved;
  const m = /\/_schemas\/([A-Za-z0-9_]+)\.js/.exec(stack);
  return m ? m[1] : null;
}

// Schema type name (IoK8sApiAppsV1Deployment) -> property names its model's
// .d.ts interface declares; built once, when first needed.
let declaredIndex = null;
function declaredProperties(schemaName) {
  if (declaredIndex === null) {
    declaredIndex = new Map();
    const walk = (dir) => {
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) {
          if (entry.name !== "_schemas" && entry.name !== "node_modules") walk(full);
        } else if (entry.name.endsWith(".d.ts")) {
          const text = fs.readFileSync(full, "utf8");
          for (const m of text.matchAll(/\bI([A-Za-z0-9_]+) as I([A-Za-z0-9_]+)\b/g)) {
            const body = new RegExp("^export interface I" + m[1] + " \\{\\n([\\s\\S]*?)^\\}", "m").exec(text);
            if (!body) continue;
            const names = new Set();
            for (const p of body[1].matchAll(/^    "([^"]+)"\??:/gm)) names.add(p[1]);
            declaredIndex.set(m[2], names);
          }
        }
      }
    };
    for (const { pkg } of PACKAGES) {
      const dir = path.join(nodeModules, pkg);
      if (fs.existsSync(dir)) walk(dir);
    }
  }
  return declaredIndex.get(schemaName) || new Set();
}

// Proxies that record the validator's reads.
function tracker() {
  const records = new Map(); // target -> {read: Set, all: bool, touched: bool, schema}
  const proxies = new Map(); // target -> proxy
  function wrap(value) {
    if (value === null || typeof value !== "object") return value;
    let proxy = proxies.get(value);
    if (proxy) return proxy;
    const rec = { read: new Set(), all: false, touched: false, schema: null };
    const touch = () => {
      if (!rec.touched) rec.schema = readingSchema();
      rec.touched = true;
    };
    records.set(value, rec);
    proxy = new Proxy(value, {
      get(target, key, receiver) {
        if (typeof key === "string") {
          touch();
          rec.read.add(key);
        }
        return wrap(Reflect.get(target, key, receiver));
      },
      has(target, key) {
        if (typeof key === "string") {
          touch();
          rec.read.add(key);
        }
        return Reflect.has(target, key);
      },
      ownKeys(target) {
        touch();
        rec.all = true;
        return Reflect.ownKeys(target);
      },
      getOwnPropertyDescriptor(target, key) {
        if (typeof key === "string") {
          touch();
          rec.read.add(key);
        }
        return Reflect.getOwnPropertyDescriptor(target, key);
      },
    });
    proxies.set(value, proxy);
    return proxy;
  }
  function unknownFields(value, p, modelName, out) {
    if (value === null || typeof value !== "object") return out;
    const rec = records.get(value);
    if (Array.isArray(value)) {
      value.forEach((item, i) => unknownFields(item, joinPath(p, i), modelName, out));
      return out;
    }
    for (const key of Object.keys(value)) {
      const sub = joinPath(p, key);
      if (rec && rec.touched && !rec.all && !rec.read.has(key) &&
          !(rec.schema && declaredProperties(rec.schema).has(key))) {
        out.push(`${sub}: unknown field (not in the schema of ${modelName})`);
      } else {
        unknownFields(value[key], sub, modelName, out);
      }
    }
    return out;
  }
  return { wrap, unknownFields };
}

async function check(obj, index) {
  const result = {
    index,
    apiVersion: obj && obj.apiVersion,
    kind: obj && obj.kind,
    name: obj && obj.metadata && obj.metadata.name,
    model: null,
    errors: [],
  };
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) {
    result.errors.push("<root>: not an object");
    return result;
  }
  const found = await loadModel(obj.apiVersion, obj.kind);
  if (!found) {
    result.errors.push(`<root>: no model for apiVersion ${obj.apiVersion} kind ${obj.kind}`);
    return result;
  }
  result.model = found.name;
  const t = tracker();
  try {
    // The model's own validate(), on the recording view of the object.
    found.model.prototype.validate.call(t.wrap(obj));
  } catch (e) {
    if (!Array.isArray(e.errors)) throw e;
    for (const err of e.errors) {
      let what = err.message;
      if (err.keyword === "enum" && err.params && err.params.allowedValues) {
        what += " " + JSON.stringify(err.params.allowedValues);
      }
      result.errors.push(`${instancePathToPath(err.instancePath, obj)}: ${what}`);
    }
  }
  t.unknownFields(obj, "", found.name, result.errors);
  return result;
}

async function main() {
  if (!fs.existsSync(path.join(nodeModules, "kubernetes-models", "package.json"))) {
    fail(`no kubernetes-models in ${nodeModules}: run scripts/install-k8s-tools.sh`);
  }
  let input;
  try {
    input = JSON.parse(fs.readFileSync(0, "utf8"));
  } catch (e) {
    fail("stdin is not JSON: " + e.message);
  }
  const objects = Array.isArray(input) ? input : [input];
  const results = [];
  for (let i = 0; i < objects.length; i++) results.push(await check(objects[i], i));
  process.stdout.write(JSON.stringify(results, null, 1) + "\n");
  process.exit(results.every((r) => r.errors.length === 0) ? 0 : 1);
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
