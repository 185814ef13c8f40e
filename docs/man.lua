-- pandoc filter for the man pages (docs/meson.build): a page's "# title" line is dropped (the
-- .TH line comes from --metadata title/section) and "## NAME" & co. become the man sections.
function Pandoc(doc)
  local blocks = {}
  for _, b in ipairs(doc.blocks) do
    if b.t ~= 'Header' or b.level > 1 then
      if b.t == 'Header' then
        b.level = b.level - 1
      end
      table.insert(blocks, b)
    end
  end
  doc.blocks = blocks
  return doc
end
