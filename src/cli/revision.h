// The source revision this binary was built from: the git commit (12 hex
// digits) at build time, the image build's -DIG_REVISION, or "unknown".
// Defined in a file the build writes (scripts/revision.cmake), so a commit
// rebuilds that one file.
#pragma once

namespace ig::cli {

const char* source_revision() noexcept;

}  // namespace ig::cli
