#include "admission/binding.h"

#include <algorithm>
#include <iterator>

#include "base/json_text.h"
#include "base/quote.h"
#include "model/image.h"

namespace ig::admission {
namespace {

std::string container_phrase(const model::ContainerFacts& c) { return "container " + quote(c.name); }

bool exempted(const Exempt& exempt, std::size_t i) { return i < exempt.size() && exempt[i]; }

// A declared list as the message shows it; "none (the image's entrypoint)" style
// words for nullopt come from the caller.
std::string show_declared(const std::optional<std::vector<std::string>>& v, std::string_view none) {
  return v ? show_command(*v) : std::string(none);
}

}  // namespace

std::string show_command(const std::vector<std::string>& command) {
  // JSON text, cut to keep a denial readable; the cut is marked.
  constexpr std::size_t kMax = 96;
  std::string out;
  json_text::Writer w(out);
  w.begin_array();
  for (const auto& part : command) w.string(part);
  w.end_array();
  if (out.size() > kMax) {
    out.resize(kMax);
    out.append("...]");
  }
  return out;
}

std::string join_phrases(const std::vector<std::string>& phrases, std::string_view noun) {
  constexpr std::size_t kMaxNamed = 5;  // a 24-container pod stays readable
  const std::size_t named = std::min(phrases.size(), kMaxNamed);
  const std::size_t rest = phrases.size() - named;
  std::string list;
  for (std::size_t i = 0; i < named; ++i) {
    if (i > 0) list += (i + 1 == named && rest == 0) ? " and " : ", ";
    list += phrases[i];
  }
  if (rest > 0) {
    list += " and " + std::to_string(rest) + " more";
    if (!noun.empty()) list.append(" ").append(noun).append(rest == 1 ? "" : "s");
  }
  return list;
}

ImageBinding image_binding(const model::PodFacts& facts, const model::Component& component,
                           const GateSettings& settings, const Exempt& exempt) {
  ImageBinding out;
  out.own_image.assign(facts.containers.size(), false);
  if (component.image.empty()) return out;
  out.bound = true;
  auto bound = model::parse_image(component.image);
  if (!bound) {
    out.component_image_error = bound.error();
    return out;
  }
  // Does `reference` run the Component's image (own) or an allowed extra one?
  enum class Match { Own, Extra, Invalid, None };
  auto match = [&](const std::string& reference, std::optional<model::ImageRef>& parsed) {
    // The Component's own reference, byte for byte (the usual pod): it
    // parsed above, and a reference runs what it names (image_matches).
    if (reference == component.image) return Match::Own;
    auto image = model::parse_image(reference);
    if (!image) return Match::Invalid;
    parsed = std::move(image).value();
    if (model::image_matches(*bound, *parsed)) return Match::Own;
    if (model::any_pattern_matches(settings.allowed_extra_images, *parsed)) return Match::Extra;
    return Match::None;
  };
  bool runs_own = false;
  for (std::size_t i = 0; i < facts.containers.size(); ++i) {
    const auto& c = facts.containers[i];
    if (exempted(exempt, i)) continue;
    // Only a container that is refused is named (no allocation on the bound path).
    if (!c.image || c.image->empty()) {
      out.unbound.push_back(container_phrase(c) + " names no image");
      continue;
    }
    std::optional<model::ImageRef> image;
    switch (match(*c.image, image)) {
      case Match::Own:
        out.own_image[i] = true;
        if (!c.init && !c.ephemeral) runs_own = true;
        continue;
      case Match::Extra: continue;
      case Match::Invalid:
        out.unbound.push_back(container_phrase(c) + " runs " + quote(*c.image) +
                              ", which is not a valid image reference");
        continue;
      case Match::None: break;
    }
    std::string phrase = container_phrase(c) + " runs " + quote(*c.image);
    if (image->canonical() != *c.image) phrase += " (" + image->canonical() + ")";
    if (!image->digest.empty() && bound->digest.empty() && image->repository == bound->repository) {
      out.digest_hint = true;
    }
    out.unbound.push_back(std::move(phrase));
  }
  for (const auto& v : facts.volumes) {
    if (!v.image) continue;
    std::optional<model::ImageRef> image;
    const Match m = match(*v.image, image);
    if (m == Match::Own || m == Match::Extra) continue;
    out.unbound.push_back("image volume " + quote(v.name) + " mounts " +
                          (v.image->empty() ? std::string("no image") : quote(*v.image)));
  }
  // A pod of sidecars alone is not the Component's code (only containers that
  // were checked count: an exempt debug container is not the pod).
  const bool has_regular = std::any_of(facts.containers.begin(), facts.containers.end(),
                                       [](const auto& c) { return !c.init && !c.ephemeral; });
  if (has_regular && !runs_own && out.unbound.empty()) {
    out.unbound.push_back("no container runs the Component's image (a pod of extra images alone is not "
                          "the Component)");
  }
  return out;
}

std::vector<std::string> entrypoint_binding(const model::PodFacts& facts, const model::Component& component,
                                            const ImageBinding& images, const Exempt& exempt) {
  std::vector<std::string> out;
  if (!images.bound) return out;
  const model::Entrypoint& declared = component.entrypoint();
  for (std::size_t i = 0; i < facts.containers.size(); ++i) {
    const auto& c = facts.containers[i];
    if (exempted(exempt, i) || i >= images.own_image.size() || !images.own_image[i]) continue;
    const bool declared_entrypoint = c.command == declared.command && c.args == declared.args;
    // An init container may instead run one of spec.exec, its command followed by its args (a migration).
    if (c.init && !declared_entrypoint && c.command) {
      std::vector<std::string> argv = *c.command;
      if (c.args) argv.insert(argv.end(), c.args->begin(), c.args->end());
      if (std::find(declared.exec.begin(), declared.exec.end(), argv) != declared.exec.end()) continue;
      out.push_back(container_phrase(c) + " runs " + show_command(argv) +
                    ", which is neither the Component's entrypoint (spec.command, spec.args) nor one of its "
                    "spec.exec commands");
      continue;
    }
    if (c.command != declared.command) {
      out.push_back(container_phrase(c) + " sets command " + show_declared(c.command, "(none)") +
                    " where the Component declares spec.command " +
                    show_declared(declared.command, "none (the image's entrypoint)"));
    }
    if (c.args != declared.args) {
      out.push_back(container_phrase(c) + " sets args " + show_declared(c.args, "(none)") +
                    " where the Component declares spec.args " + show_declared(declared.args, "none (the image's CMD)"));
    }
    for (const auto& e : c.exec) {
      if (std::find(declared.exec.begin(), declared.exec.end(), e.command) != declared.exec.end()) continue;
      out.push_back(container_phrase(c) + " runs " + show_command(e.command) + " in " + e.field +
                    ".exec, which is not one of the Component's spec.exec commands" +
                    (declared.exec.empty() ? std::string(" (it declares none)") : std::string()));
    }
  }
  return out;
}

std::vector<std::string> loader_env(const model::PodFacts& facts, const Exempt& exempt) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < facts.containers.size(); ++i) {
    const auto& c = facts.containers[i];
    if (exempted(exempt, i)) continue;
    for (const auto& name : c.loader_env) out.push_back(container_phrase(c) + " sets env " + name);
    if (c.env_from) out.push_back(container_phrase(c) + " takes envFrom (its keys cannot be checked)");
  }
  return out;
}

std::vector<std::string> host_access(const model::PodFacts& facts) {
  std::vector<std::string> out;
  if (facts.host_network) out.push_back("hostNetwork");
  if (facts.host_pid) out.push_back("hostPID");
  if (facts.host_ipc) out.push_back("hostIPC");
  for (const auto& c : facts.containers) {
    if (c.privileged) out.push_back("privileged " + container_phrase(c));
    for (const auto& cap : c.added_capabilities) out.push_back("capability " + cap + " added to " + container_phrase(c));
  }
  for (const auto& v : facts.volumes) {
    if (v.host_path) out.push_back("hostPath volume " + quote(v.name));
  }
  return out;
}

std::vector<std::string> unbound_outside_microvm(const model::PodFacts& facts, const model::Component& component,
                                                 const ImageBinding& images, const Exempt& exempt) {
  std::vector<std::string> out = host_access(facts);
  const auto append = [&out](std::vector<std::string> more) {
    out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  };
  append(entrypoint_binding(facts, component, images, exempt));
  append(loader_env(facts, exempt));
  return out;
}

std::vector<std::string> unbound_outside_microvm(const model::PodFacts& facts, const model::Component& component,
                                                 const GateSettings& settings) {
  return unbound_outside_microvm(facts, component, image_binding(facts, component, settings, {}), {});
}

std::vector<std::string> microvm_conflicts(const model::PodFacts& facts, const GateSettings& settings) {
  std::vector<std::string> out;
  if (facts.host_network) out.push_back("hostNetwork");
  if (facts.host_pid) out.push_back("hostPID");
  if (facts.host_ipc) out.push_back("hostIPC");
  for (const auto& c : facts.privileged_containers) out.push_back("privileged container " + quote(c));
  for (const auto& v : facts.volumes) {
    if (v.host_path) out.push_back("hostPath volume " + quote(v.name) + " (a host path shared into the guest)");
  }
  const auto& allowed = settings.allowed_kata_annotations;
  for (const auto& key : facts.kata_annotations) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    out.push_back("annotation " + quote(key) + " (configures the microVM from the pod)");
  }
  return out;
}

std::vector<std::size_t> added_ephemeral(const model::PodFacts& facts, const model::PodFacts* old) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < facts.containers.size(); ++i) {
    const auto& c = facts.containers[i];
    if (!c.ephemeral) continue;
    const bool existed = old != nullptr && std::any_of(old->containers.begin(), old->containers.end(),
                                                       [&](const auto& o) { return o == c; });
    if (!existed) out.push_back(i);
  }
  return out;
}

}  // namespace ig::admission
