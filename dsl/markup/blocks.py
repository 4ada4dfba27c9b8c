"""Blocks: nesting, ``rep`` (stacked copies), ``stretch`` (side-by-side copies), ``src`` imports.

A repeated block runs its body again with its imports rebound to the previous copy's
exports (in order); afterwards its imports mean what they meant before and its outputs
mean the last copy's values.  A stretched block runs its body N times side by side and
binds each export to a ``Concat`` (last axis) of the copies.  A block with ``src``
brings in another file whose names are all prefixed ``name$``; its ``<import>`` tags
bind that file's own imports in order.
"""

from __future__ import annotations

from dsl import ir
from dsl.errors import MarkupError
from dsl.limits import check_limit
from dsl.markup.document import Element
from dsl.markup.state import IO_ATTRS, CompilerState, Context
from dsl.safe_paths import contained

__all__ = ["BlockCompiler"]

_BLOCK_ATTRS = ("title", "rep", "stretch", "src", "name")


class BlockCompiler(CompilerState):
    """The block rules; nodes inside a block are compiled by ``self._node``."""

    def _block(self, element: Element, prefix: str, context: Context) -> None:
        self._check(element, _BLOCK_ATTRS, children=("import", "export", "node", "block"))
        rep = self._count(element, "rep")
        stretch = self._count(element, "stretch")
        if rep > 1 and stretch > 1:
            raise MarkupError(
                "a block cannot have both rep and stretch",
                element.attributes["stretch"].location,
                hint="nest a stretched block inside a repeated one (Agrippa silently ignored rep here)",
            )
        if element.get("src") is not None:
            body, imports, exports, inner_prefix, inner_context = self._imported(element, prefix, context)
        else:
            if element.get("name") is not None:
                raise MarkupError(
                    "name is only meaningful on an imported block (one with src)",
                    element.attributes["name"].location,
                    hint='import a file with <block src="file.agr" name="prefix"/>',
                )
            for child in element.children:
                if child.tag in ("import", "export"):
                    self._check(child, IO_ATTRS, ("from",))
            body = element.children
            imports = [c for c in element.children if c.tag == "import"]
            exports = [c for c in element.children if c.tag == "export"]
            inner_prefix, inner_context = prefix, context
        import_names = [inner_prefix + self._string(c, "from") for c in imports]
        for child, full in zip(imports, import_names):
            if full not in self.env:
                raise MarkupError(
                    f"the block imports {full!r}, which nothing defines before it",
                    child.attributes["from"].value_location,
                    hint="a block's imports must be model imports or outputs of earlier blocks",
                )
            self._declare_io(child, self.env[full], "import")
        outer_copies = self.copies
        self.copies *= max(rep, stretch)  # (nested repetitions multiply: refused before the first copy)
        where = element.attributes.get("rep") or element.attributes.get("stretch")
        check_limit("markup_nodes", self.copies, f"{self.copies:,} copies of this block (nested rep/stretch multiply)",
                    where.value_location if where is not None else element.location)
        if stretch > 1:
            self._stretch(element, body, exports, inner_prefix, inner_context, stretch)
        else:
            self._repeat(body, import_names, exports, inner_prefix, inner_context, rep)
        self.copies = outer_copies
        for child in exports:
            exported = self._final_export(child, inner_prefix, tolerated=max(rep, stretch) == 1)
            if exported is not None:
                self._declare_io(child, exported, "export")

    def _final_export(self, element: Element, prefix: str, tolerated: bool) -> ir.Value | None:
        """What a block's ``<export>`` gives the blocks after it.  One that nothing defines
        changes nothing when no copy of the block reads it (Agrippa ignored it): then
        it is skipped with a warning (an error under ``strict=True``)."""
        if tolerated and prefix + self._name(element, "from") not in self.env:
            self.tolerate(f"the block exports {prefix + self._name(element, 'from')!r}, which nothing in it defines; "
                          "ignored", element.attributes["from"].value_location,
                          "export the name of an output of a node inside the block")
            return None
        return self._export_value(element, prefix)

    def _export_value(self, element: Element, prefix: str) -> ir.Value:
        from_attr = element.attributes["from"]
        full = prefix + self._name(element, "from")
        found = self.env.get(full)
        if found is None:
            raise MarkupError(
                f"the block exports {full!r}, which nothing in it defines",
                from_attr.value_location,
                hint="export the name of an output of a node inside the block",
            )
        return found

    def _imported(
        self, element: Element, prefix: str, context: Context
    ) -> tuple[list[Element], list[Element], list[Element], str, Context]:
        src_attr = element.attributes["src"]
        if element.get("name") is None:
            raise MarkupError(
                "an imported block needs a name (its names are prefixed name$)",
                element.location,
                hint='write <block src="..." name="prefix"/>',
            )
        for child in element.children:
            if child.tag != "import":
                raise MarkupError(
                    f"<{child.tag}> inside an imported block",
                    child.location,
                    hint="an imported block holds only <import from=...> tags, bound in order to the file's imports",
                )
            self._check(child, ("from",), ("from",))
        written = self._string(element, "src")
        path = contained(context.root, context.directory / written, f"imported file {written!r}", src_attr.value_location)
        if not path.is_file():
            raise MarkupError(f"imported file {written!r} does not exist", src_attr.value_location,
                              hint="src is a path relative to the importing file, inside the project folder")
        if path in context.files:
            chain = " -> ".join(p.name for p in (*context.files, path))
            raise MarkupError(f"import cycle: {chain}", src_attr.value_location, hint="a file cannot import itself")
        root = self._document(path)
        self._check_root(root, main=False)
        inner_prefix = f"{prefix}{self._name(element, 'name')}$"
        owner = self.prefix_owners.setdefault(inner_prefix, id(element))
        if owner != id(element):
            raise MarkupError(
                f"two imported blocks are both named {inner_prefix[:-1]!r}",
                element.attributes["name"].value_location,
                hint="give each imported block its own name",
            )
        imports = [c for c in root.children if c.tag == "import"]
        exports = [c for c in root.children if c.tag == "export"]
        if len(element.children) > len(imports):
            raise MarkupError(
                f"{len(element.children)} imports given, but {path.name} has only {len(imports)}",
                element.children[len(imports)].location,
            )
        for child, target in zip(element.children, imports):
            outer = self._lookup(prefix + self._name(child, "from"), child.attributes["from"])
            full = inner_prefix + self._name(target, "from")
            self._define(full, outer, (id(child), prefix), child.location)
        body = [c for c in root.children if c.tag == "block"]
        return body, imports, exports, inner_prefix, Context(path.parent, (*context.files, path), context.root)

    def _body(self, children: list[Element], prefix: str, context: Context) -> None:
        # (nested rep/stretch multiply: the whole compilation's tags are bounded, before each copy)
        self.tags_built += 1 + len(children)
        check_limit("markup_nodes", self.tags_built, "the block copies and nodes this markup builds",
                    children[0].location if children else None)
        for child in children:
            if child.tag == "node":
                self._node(child, prefix)
            elif child.tag == "block":
                self._block(child, prefix, context)

    def _repeat(
        self,
        body: list[Element],
        import_names: list[str],
        exports: list[Element],
        prefix: str,
        context: Context,
        rep: int,
    ) -> None:
        saved = {full: self.env[full] for full in import_names}
        start = len(self.defined_log)
        for copy in range(rep):
            if copy:
                produced = [self._export_value(e, prefix) for e in exports]
                for full, value in zip(import_names, produced):
                    self.env[full] = value
            self._body(body, prefix, context)
        if rep > 1:
            defined_inside = set(self.defined_log[start:])
            for full, value in saved.items():
                if full not in defined_inside:
                    self.env[full] = value

    def _stretch(
        self,
        element: Element,
        body: list[Element],
        exports: list[Element],
        prefix: str,
        context: Context,
        stretch: int,
    ) -> None:
        if not exports:
            raise MarkupError(
                "a stretched block needs exports (they are concatenated)",
                element.attributes["stretch"].location,
            )
        copies: list[list[ir.Value]] = [[] for _ in exports]
        for _ in range(stretch):
            self._body(body, prefix, context)
            for index, child in enumerate(exports):
                copies[index].append(self._export_value(child, prefix))
        for child, values in zip(exports, copies):
            title = self._node_name(f"{prefix}stretch_concat")
            full = prefix + self._name(child, "from")
            elems = {self._elem_of(v) for v in values}
            elem = elems.pop() if len(elems) == 1 else None
            out = ir.Value(
                self._fresh_name(f"{full}$concat"),
                ir.TensorType(elem, None) if elem is not None else None,
                location=child.location,
            )
            node = ir.Node(
                "Concat",
                inputs=list(values),
                outputs=[out],
                attributes={"axis": ir.Attr("axis", ir.AttrKind.INT, -1, location=element.location)},
                name=title,
                location=element.location,
            )
            out.producer = node
            self._claim(out)
            self.nodes.append(node)
            self.node_locations[title] = element.location
            self.env[full] = out
            self.defined_log.append(full)
