// Text for other formats: what every writer of HTML, SVG and XML (the HTML
// report, its charts, the gate's JUnit file) escapes the same way.
#pragma once

#include <string>
#include <string_view>

namespace pipetune {

// & < > " ' as entities, so that the text is safe as element content and as
// a quoted attribute value (single or double quotes); every other byte,
// UTF-8 included, is kept.
std::string EscapeXml(std::string_view text);

}  // namespace pipetune
