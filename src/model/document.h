// Decoding Kubernetes documents (YAML or JSON) into nlohmann::json, safely.
//
// Contract: never crashes and never recurses without bound, whatever the
// input. Limits (depth, node count, size) are enforced before or during the
// decode; violations and syntax errors come back as one-line errors that name
// the source ("FILE: line 3, column 7: ...").
//  - JSON: depth is checked by a linear pre-scan before nlohmann parses (its
//    dump/copy/compare recurse); invalid UTF-8 is a syntax error.
//  - YAML (yaml-cpp): its own DeepRecursion guard is caught; the YAML->JSON
//    walk caps depth and the number of nodes produced, so alias expansion
//    ("billion laughs") and alias cycles end in an error.
//  - YAML merge keys ("<<: *base", "<<: [*a, *b]") are merged as go-yaml
//    (the API server's reader) merges them: a key after "<<" overrides the
//    merged value, earlier maps of a list win; a key set both before "<<"
//    and by it is refused (go-yaml's versions disagree on it). A quoted "<<"
//    is an ordinary key.
//  - Scalars follow Kubernetes' YAML->JSON conversion: quoted scalars are
//    strings; plain null/~/empty -> null, true/false -> bool, integers and
//    floats -> numbers, everything else a string.
#pragma once

#include <cstddef>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "base/result.h"

namespace ig::model {

using json = nlohmann::json;

struct DecodeLimits {
  std::size_t max_depth = 128;             // Kubernetes objects are ~15 deep
  std::size_t max_nodes = 1'000'000;       // YAML values produced from one stream (all its documents)
  std::size_t max_bytes = 16 * 1024 * 1024;
};

// The linear depth pre-scan (base/json_depth.h), under its old name here.
using ig::json_nesting_depth;

// One JSON value. `source` names the input in messages.
Result<json> parse_json(std::string_view text, std::string_view source,
                        const DecodeLimits& limits = {});

// Every document of a YAML stream (a JSON text is YAML too, but JSON input is
// routed to parse_json by parse_documents for exact JSON semantics).
Result<std::vector<json>> parse_yaml_documents(std::string_view text, std::string_view source,
                                               const DecodeLimits& limits = {});

// JSON when the first non-blank byte is '{' or '[', YAML otherwise. Empty
// documents (a lone "---") are dropped.
Result<std::vector<json>> parse_documents(std::string_view text, std::string_view source,
                                          const DecodeLimits& limits = {});

// Reads a stream to its end without seeking (a pipe, stdin), refusing more
// than limits.max_bytes: "SOURCE: input is larger than N bytes".
Result<std::string> read_text(std::istream& in, const std::string& source, const DecodeLimits& limits = {});

// The same for a file: a directory is "PATH: is a directory"; a regular file
// over the limit is refused before it is read.
Result<std::string> read_text_file(const std::string& path, const DecodeLimits& limits = {});

// One object of a manifest stream and where it starts.
struct Manifest {
  json object;
  std::size_t line = 0;      // 1-based line of the document or list item; 0 when unknown
  std::size_t document = 0;  // 1-based index of its document in the stream (empty ones not counted)
  std::size_t item = 0;      // 1-based index in its document's `items`; 0 when not from a list
};

// Every object of a stream, as kubectl reads `-f`: each document of a YAML
// stream or the JSON value, and in place of a list document (kind "List" or
// "<Kind>List" with an `items` list) each of its items (kind and apiVersion
// filled in from a typed list). Errors as parse_documents.
Result<std::vector<Manifest>> parse_manifests(std::string_view text, std::string_view source,
                                              const DecodeLimits& limits = {});

// Reads a file (refusing ones over limits.max_bytes) and parses its documents.
Result<std::vector<json>> load_documents_file(const std::string& path,
                                              const DecodeLimits& limits = {});

// Exactly one document from a file: an error names the file when there are none or several.
Result<json> load_single_document_file(const std::string& path, const DecodeLimits& limits = {});

// The same for text already read ("SOURCE: expected one document, found 2").
Result<json> parse_single_document(std::string_view text, std::string_view source,
                                   const DecodeLimits& limits = {});

// "a string", "a list", "a map", "a number", "a boolean", "null" — for messages.
std::string_view json_type_phrase(const json& value) noexcept;
std::string_view json_type_phrase(json::value_t type) noexcept;

// A JSON dump that never throws (invalid UTF-8 is replaced).
std::string dump_json(const json& value, int indent = -1);

// The same value as a YAML document (block style, every string quoted so
// that it reads back as a string); parse_documents() reads it back equal.
std::string dump_yaml(const json& value);

}  // namespace ig::model
