//! Linking a compiled schema: every `$ref` pointed at its target, nested
//! `anyOf`s flattened, and each node's least nesting measured, so that the
//! reader never starts a value it cannot finish.
//!
//! Each pass is linear in the nodes and their edges (the `anyOf` lists are
//! at most [`MAX_ALTERNATIVES`] long once flattened), iterative rather than
//! recursive, so neither the time nor the stack depth of linking depends
//! on how the references chain or fan out.

use super::json::MAX_DEPTH;
use super::schema::{invalid, types, unsupported, Node, NodeId, Rules, Schema, SchemaError};

/// Most alternatives an `anyOf` offers once the `anyOf`s inside it are
/// flattened (duplicates counted once).
pub const MAX_ALTERNATIVES: usize = 256;

/// A least nesting above every one the reader allows: no value fits.
const TOO_DEEP: u8 = MAX_DEPTH as u8 + 1;

/// Points every reference at its target, flattens the `anyOf`s and
/// measures the nodes; refuses a schema with a cycle that reads no text,
/// an `anyOf` of too many alternatives, or no value within [`MAX_DEPTH`]
/// levels of nesting.
pub(super) fn link(mut nodes: Vec<Node>, root: NodeId) -> Result<Schema, SchemaError> {
    let target = targets(&nodes)?;
    for node in &mut nodes {
        match node {
            Node::Typed(rules) => {
                rules.properties.iter_mut().for_each(|p| p.node = target[p.node as usize]);
                if let Some(additional) = rules.additional.as_mut() {
                    *additional = target[*additional as usize];
                }
                rules.items = target[rules.items as usize];
            }
            Node::AnyOf(children) => children.iter_mut().for_each(|c| *c = target[*c as usize]),
            Node::Literals(_) | Node::Alias(_) | Node::Pending => {}
        }
    }
    let root = target[root as usize];
    flatten_any_of(&mut nodes)?;
    let min_depth = min_depths(&nodes);
    if min_depth[root as usize] > MAX_DEPTH as u8 {
        return Err(invalid(
            "/",
            format!(
                "the schema accepts no JSON text of at most {MAX_DEPTH} levels of nesting (a required property or \
                 item that contains itself, or required nesting deeper than that)"
            ),
        ));
    }
    Ok(Schema { nodes, root, min_depth })
}

fn cycle() -> SchemaError {
    unsupported("/", "$ref cycle that reads no text")
}

/// Per node, the node that is not a reference which it stands for.
fn targets(nodes: &[Node]) -> Result<Vec<NodeId>, SchemaError> {
    const UNSET: NodeId = NodeId::MAX;
    let mut target = vec![UNSET; nodes.len()];
    let mut on_chain = vec![false; nodes.len()];
    let mut chain = Vec::new();
    for start in 0..nodes.len() {
        let mut at = start;
        let end = loop {
            if target[at] != UNSET {
                break target[at];
            }
            match nodes[at] {
                Node::Alias(next) => {
                    if on_chain[at] {
                        return Err(cycle());
                    }
                    on_chain[at] = true;
                    chain.push(at);
                    at = next as usize;
                }
                // Every reference's target compiled before linking.
                Node::Pending => return Err(invalid("/", "a $ref was left unresolved")),
                _ => break at as NodeId,
            }
        };
        for link in chain.drain(..) {
            on_chain[link] = false;
            target[link] = end;
        }
        target[at] = end;
    }
    Ok(target)
}

/// Replaces each `anyOf`'s list by the alternatives that are not `anyOf`s
/// themselves, reached through nested ones (each once, in the order a
/// depth-first walk meets them); refuses an `anyOf` that reaches itself
/// through `anyOf`s alone, since its branches would read no byte.
fn flatten_any_of(nodes: &mut [Node]) -> Result<(), SchemaError> {
    const UNSEEN: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let children = |nodes: &[Node], id: usize| -> Option<Vec<NodeId>> {
        match &nodes[id] {
            Node::AnyOf(children) => Some(children.clone()),
            _ => None,
        }
    };
    let mut state = vec![UNSEEN; nodes.len()];
    let mut flat: Vec<Option<Vec<NodeId>>> = vec![None; nodes.len()];
    // Which `anyOf` (plus one) last took a node into its list.
    let mut taken_by = vec![0u32; nodes.len()];
    for start in 0..nodes.len() {
        if state[start] != UNSEEN || !matches!(nodes[start], Node::AnyOf(_)) {
            continue;
        }
        // A walk of `anyOf`s: each with its children and the next to visit.
        let mut walk: Vec<(usize, Vec<NodeId>, usize)> = Vec::new();
        state[start] = OPEN;
        walk.push((start, children(nodes, start).unwrap_or_default(), 0));
        while let Some((_, kids, next)) = walk.last_mut() {
            if let Some(&child) = kids.get(*next) {
                *next += 1;
                let child = child as usize;
                if matches!(nodes[child], Node::AnyOf(_)) {
                    match state[child] {
                        OPEN => return Err(cycle()),
                        UNSEEN => {
                            state[child] = OPEN;
                            walk.push((child, children(nodes, child).unwrap_or_default(), 0));
                        }
                        _ => {}
                    }
                }
                continue;
            }
            let Some((id, kids, _)) = walk.pop() else { break };
            let mut list = Vec::new();
            for &child in &kids {
                let leaves = match &flat[child as usize] {
                    Some(leaves) => leaves.as_slice(),
                    None => std::slice::from_ref(&child),
                };
                for &leaf in leaves {
                    if taken_by[leaf as usize] != id as u32 + 1 {
                        taken_by[leaf as usize] = id as u32 + 1;
                        list.push(leaf);
                    }
                }
                if list.len() > MAX_ALTERNATIVES {
                    return Err(unsupported("/", &format!("anyOf with more than {MAX_ALTERNATIVES} alternatives")));
                }
            }
            flat[id] = Some(list);
            state[id] = DONE;
        }
    }
    for (node, list) in nodes.iter_mut().zip(flat) {
        if let Some(list) = list {
            *node = Node::AnyOf(list);
        }
    }
    Ok(())
}

/// Per node, the fewest levels of containers a value of it needs, or
/// [`TOO_DEEP`] when none fits within [`MAX_DEPTH`]: found level by level
/// (the nodes that need at most 0, then at most 1, ...), since a container
/// needs one level more than the deepest of the values it must hold.
fn min_depths(nodes: &[Node]) -> Vec<u8> {
    let mut depth = vec![TOO_DEEP; nodes.len()];
    for level in 0..=MAX_DEPTH as u8 {
        let mut found = false;
        // Containers and scalars, from the levels below this one.
        for (id, node) in nodes.iter().enumerate() {
            if depth[id] != TOO_DEEP {
                continue;
            }
            let least = match node {
                Node::Literals(_) => 0,
                Node::Typed(rules) => typed_depth(rules, &depth),
                Node::AnyOf(_) | Node::Alias(_) | Node::Pending => continue,
            };
            if least <= level {
                depth[id] = least;
                found = true;
            }
        }
        // Each flattened `anyOf` as its shallowest alternative.
        for (id, node) in nodes.iter().enumerate() {
            if let Node::AnyOf(alternatives) = node {
                if depth[id] == TOO_DEEP && alternatives.iter().any(|&a| depth[a as usize] <= level) {
                    depth[id] = level;
                    found = true;
                }
            }
        }
        if !found {
            break;
        }
    }
    depth
}

/// The least nesting of a typed node's values, from its children's.
fn typed_depth(rules: &Rules, depth: &[u8]) -> u8 {
    const SCALARS: u8 = types::STRING | types::NUMBER | types::INTEGER | types::BOOLEAN | types::NULL;
    let mut least = TOO_DEEP;
    if rules.types & SCALARS != 0 {
        least = 0;
    }
    if rules.types & types::OBJECT != 0 {
        let inner = rules.properties.iter().filter(|p| p.required).map(|p| depth[p.node as usize]).max().unwrap_or(0);
        least = least.min(inner.saturating_add(1).min(TOO_DEEP));
    }
    if rules.types & types::ARRAY != 0 {
        let inner = if rules.min_items > 0 { depth[rules.items as usize] } else { 0 };
        least = least.min(inner.saturating_add(1).min(TOO_DEEP));
    }
    least
}

impl Schema {
    /// Whether a value of `node` can still be written whole with `open`
    /// containers open around it.
    pub(super) fn fits(&self, node: NodeId, open: usize) -> bool {
        open + self.min_depth[node as usize] as usize <= MAX_DEPTH
    }

    /// Whether an object of `rules` can be opened and closed with `open`
    /// containers open around it.
    pub(super) fn object_fits(&self, rules: &Rules, open: usize) -> bool {
        open < MAX_DEPTH && rules.properties.iter().filter(|p| p.required).all(|p| self.fits(p.node, open + 1))
    }

    /// Whether an array of `rules` can be opened and closed with `open`
    /// containers open around it.
    pub(super) fn array_fits(&self, rules: &Rules, open: usize) -> bool {
        open < MAX_DEPTH && (rules.min_items == 0 || self.fits(rules.items, open + 1))
    }
}
