// A minimal XML reader for the report tool's tests: it checks that a document is well-formed (one root
// element, tags that nest and close, quoted attributes without duplicates, only the five predefined entities
// and numeric references, no '<' in text) and returns its elements in document order with their attributes
// and text, so a test can find the SVG's points, ticks and bars and read their coordinates.
#pragma once
#include <cctype>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace xml_check {

struct Element {
  std::string name;
  std::map<std::string, std::string> attr;
  std::string text;  // the text directly inside it, entities decoded
  int depth = 0;
  bool has_class(const std::string& c) const {
    const auto it = attr.find("class");
    if (it == attr.end()) return false;
    const std::string& v = it->second;
    for (size_t p = 0; (p = v.find(c, p)) != std::string::npos; p += c.size()) {
      const bool start = p == 0 || v[p - 1] == ' ', end = p + c.size() == v.size() || v[p + c.size()] == ' ';
      if (start && end) return true;
    }
    return false;
  }
  double num(const std::string& key) const { return std::stod(attr.at(key)); }
};

class Reader {
 public:
  // Throws std::runtime_error naming the byte where the document stops being well-formed.
  explicit Reader(const std::string& doc) : s_(doc) { parse(); }
  const std::vector<Element>& elements() const { return elements_; }
  std::vector<const Element*> with_class(const std::string& c) const {
    std::vector<const Element*> out;
    for (const auto& e : elements_)
      if (e.has_class(c)) out.push_back(&e);
    return out;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;
  std::vector<Element> elements_;

  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("not well-formed XML: " + why + " at byte " + std::to_string(i_));
  }
  bool starts(const char* w) const { return s_.compare(i_, std::char_traits<char>::length(w), w) == 0; }
  void ws() {
    while (i_ < s_.size() && std::isspace((unsigned char)s_[i_])) i_++;
  }
  static bool name_char(char c) {
    return std::isalnum((unsigned char)c) || c == '-' || c == '_' || c == ':' || c == '.';
  }
  std::string name() {
    const size_t a = i_;
    if (i_ >= s_.size() || !(std::isalpha((unsigned char)s_[i_]) || s_[i_] == '_')) fail("a name expected");
    while (i_ < s_.size() && name_char(s_[i_])) i_++;
    return s_.substr(a, i_ - a);
  }
  // Text up to `stop`, with references decoded; '<' is not allowed inside.
  std::string decoded(char stop) {
    std::string o;
    while (i_ < s_.size() && s_[i_] != stop) {
      const char c = s_[i_];
      if (c == '<') fail("'<' inside text or an attribute");
      if (c == '&') {
        const size_t semi = s_.find(';', i_);
        if (semi == std::string::npos) fail("an unterminated reference");
        const std::string ref = s_.substr(i_ + 1, semi - i_ - 1);
        static const std::map<std::string, std::string> known = {
            {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}};
        if (known.count(ref)) {
          o += known.at(ref);
        } else if (ref.size() > 1 && ref[0] == '#') {
          o += '?';  // a numeric reference: valid, its character does not matter here
        } else {
          fail("unknown entity &" + ref + ";");
        }
        i_ = semi + 1;
        continue;
      }
      o += c;
      i_++;
    }
    return o;
  }
  void parse() {
    if (starts("<?xml")) {
      const size_t e = s_.find("?>", i_);
      if (e == std::string::npos) fail("an unterminated XML declaration");
      i_ = e + 2;
    }
    ws();
    if (i_ >= s_.size() || s_[i_] != '<') fail("no root element");
    element(0);
    ws();
    if (i_ != s_.size()) fail("content after the root element");
  }
  void element(int depth) {
    i_++;  // '<'
    Element e;
    e.name = name();
    e.depth = depth;
    while (true) {
      ws();
      if (i_ >= s_.size()) fail("an unterminated start tag");
      if (s_[i_] == '/' || s_[i_] == '>') break;
      const std::string key = name();
      ws();
      if (i_ >= s_.size() || s_[i_] != '=') fail("'=' expected after attribute " + key);
      i_++;
      ws();
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) fail("an unquoted attribute " + key);
      const char q = s_[i_++];
      const std::string value = decoded(q);
      if (i_ >= s_.size()) fail("an unterminated attribute value");
      i_++;
      if (e.attr.count(key)) fail("a duplicate attribute " + key);
      e.attr[key] = value;
    }
    const size_t index = elements_.size();
    elements_.push_back(e);
    if (s_[i_] == '/') {
      if (!starts("/>")) fail("'/>' expected");
      i_ += 2;
      return;
    }
    i_++;  // '>'
    std::string text;
    while (true) {
      if (i_ >= s_.size()) fail("element <" + e.name + "> is never closed");
      if (starts("</")) {
        i_ += 2;
        const std::string closing = name();
        if (closing != e.name) fail("</" + closing + "> closes <" + e.name + ">");
        ws();
        if (i_ >= s_.size() || s_[i_] != '>') fail("'>' expected");
        i_++;
        elements_[index].text = text;
        return;
      }
      if (starts("<!--")) {
        const size_t end = s_.find("-->", i_);
        if (end == std::string::npos) fail("an unterminated comment");
        i_ = end + 3;
      } else if (s_[i_] == '<') {
        element(depth + 1);
      } else {
        text += decoded('<');
      }
    }
  }
};

}  // namespace xml_check
