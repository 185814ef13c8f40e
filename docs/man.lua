-- pandoc filter for the man pages (docs/meson.build): a page's "# title" line is dropped (the
-- .TH line comes from --metadata title/section) and "## NAME" & co. become the man sections.
-- The NAME paragraph is written as man-db's lexgrog reads it (whatis, apropos, lintian):
-- "NAME \- description", NAME the page's own name (--metadata name=gpuscope-agent) and the
-- description what follows the first em dash of docs/*.md's NAME paragraph. A page with no
-- NAME section gets one, its description the page's title line, and the text up to its first
-- section a DESCRIPTION heading.
local function whatis(para, name)
  for i, el in ipairs(para.content) do
    if el.t == 'Str' and el.text:find('—', 1, true) then
      local rest = el.text:gsub('^.-—', '', 1)
      local out = {pandoc.Str(name), pandoc.Space(), pandoc.RawInline('man', '\\-')}
      if rest ~= '' then
        table.insert(out, pandoc.Space())
        table.insert(out, pandoc.Str(rest))
      end
      for j = i + 1, #para.content do
        table.insert(out, para.content[j])
      end
      return pandoc.Para(out)
    end
  end
  return para
end

function Pandoc(doc)
  local name = doc.meta.name and pandoc.utils.stringify(doc.meta.name)
  local blocks = {}
  local in_name = false
  local has_name = false
  for _, b in ipairs(doc.blocks) do
    if b.t == 'Header' and b.level == 2 and pandoc.utils.stringify(b) == 'NAME' then
      has_name = true
    end
  end
  for i, b in ipairs(doc.blocks) do
    if b.t == 'Header' and b.level == 1 and name and not has_name then
      table.insert(blocks, pandoc.Header(1, 'NAME'))
      local desc = {pandoc.Str(name), pandoc.Space(), pandoc.RawInline('man', '\\-'), pandoc.Space()}
      for _, el in ipairs(b.content) do
        table.insert(desc, el)
      end
      table.insert(blocks, pandoc.Para(desc))
      local nxt = doc.blocks[i + 1]
      if nxt and nxt.t ~= 'Header' then
        table.insert(blocks, pandoc.Header(1, 'DESCRIPTION'))
      end
      has_name = true
    end
    if b.t ~= 'Header' or b.level > 1 then
      if b.t == 'Header' then
        b.level = b.level - 1
        in_name = b.level == 1 and pandoc.utils.stringify(b) == 'NAME'
      elseif in_name and name and b.t == 'Para' then
        b = whatis(b, name)
        in_name = false
      end
      table.insert(blocks, b)
    end
  end
  doc.blocks = blocks
  return doc
end
