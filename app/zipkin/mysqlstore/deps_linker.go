package mysqlstore

import (
	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// dependencyLinker computes service-graph links from whole traces with the
// rules of Zipkin's DependencyLinker: each trace is merged (mergeTrace) and
// built into a span tree (spanTree), which is walked breadth-first; links
// come from server spans and from the leaf client spans that record their
// remote service (uninstrumented servers); kind-less spans with both names
// count as clients; messaging spans link producer→broker and
// broker→consumer. Link order is the order links were first seen.
type dependencyLinker struct {
	index map[[2]string]int
	links []model.DependencyLink
}

// putTrace adds the links of one trace (all spans share one trace ID).
func (l *dependencyLinker) putTrace(spans []model.Span) {
	if len(spans) == 0 {
		return
	}
	root := buildSpanTree(mergeTrace(spans))
	queue := make([]*spanNode, 0, len(spans))
	if root.span == nil { // synthetic root of a headless trace
		queue = append(queue, root.children...)
	} else {
		queue = append(queue, root)
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		queue = append(queue, cur.children...)
		l.visit(root, cur)
	}
}

func (l *dependencyLinker) visit(root, cur *spanNode) {
	sp := cur.span
	kind := sp.Kind
	// For a client with children, the server's view is preferred.
	if kind == model.KindClient && len(cur.children) > 0 {
		return
	}
	local, remote := sp.LocalServiceName(), sp.RemoteServiceName()
	if kind == model.KindUnset {
		if local == "" || remote == "" {
			return // not a remote span
		}
		kind = model.KindClient
	}
	var parent, child string
	switch kind {
	case model.KindServer, model.KindConsumer:
		child, parent = local, remote
		if cur == root && parent == "" {
			return // the root's caller is unknown
		}
	case model.KindClient, model.KindProducer:
		parent, child = local, remote
	default:
		return
	}
	_, isError := sp.Tags["error"]
	if kind == model.KindProducer || kind == model.KindConsumer {
		if parent != "" && child != "" {
			l.add(parent, child, isError)
		}
		return
	}

	// Local spans may lie between this span and its remote parent.
	if anc := firstRemoteAncestor(cur); anc != nil {
		if ancName := anc.LocalServiceName(); ancName != "" {
			// Backfill the link to a client whose service differs from its
			// remote ancestor's (remote name put on client annotations).
			if kind == model.KindClient && local != "" && ancName != local {
				l.add(ancName, local, false)
			}
			if kind == model.KindServer || parent == "" {
				parent = ancName
			}
			// The server side of a split RPC carries its client's error.
			if !isError && anc.Kind == model.KindClient && sp.ParentID != 0 && sp.ParentID == anc.ID {
				_, isError = anc.Tags["error"]
			}
		}
	}
	if parent == "" || child == "" {
		return
	}
	l.add(parent, child, isError)
}

func firstRemoteAncestor(n *spanNode) *model.Span {
	for a := n.parent; a != nil; a = a.parent {
		if a.span != nil && a.span.Kind != model.KindUnset {
			return a.span
		}
	}
	return nil
}

func (l *dependencyLinker) add(parent, child string, isError bool) {
	if l.index == nil {
		l.index = make(map[[2]string]int)
	}
	k := [2]string{parent, child}
	i, ok := l.index[k]
	if !ok {
		i = len(l.links)
		l.index[k] = i
		l.links = append(l.links, model.DependencyLink{Parent: parent, Child: child})
	}
	l.links[i].CallCount++
	if isError {
		l.links[i].ErrorCount++
	}
}

// mergeLinks sums links with the same parent and child, keeping the order
// in which pairs were first seen (Zipkin's DependencyLinker.merge).
func mergeLinks(in []model.DependencyLink) []model.DependencyLink {
	var l dependencyLinker
	for _, link := range in {
		l.add(link.Parent, link.Child, false)
		i := l.index[[2]string{link.Parent, link.Child}]
		l.links[i].CallCount += link.CallCount - 1
		l.links[i].ErrorCount += link.ErrorCount
	}
	return l.links
}

// spanNode is a node of a trace tree; span is nil for the synthetic root of
// a trace whose root span is missing.
type spanNode struct {
	parent   *spanNode
	span     *model.Span
	children []*spanNode
}

// nodeKey identifies a span in the tree: by ID, and for a shared span also
// by its local endpoint, since several servers may share a client's ID.
type nodeKey struct {
	id       model.ID
	shared   bool
	endpoint model.Endpoint
	hasEP    bool
}

func keyFor(id model.ID, shared bool, e *model.Endpoint) nodeKey {
	if !shared {
		return nodeKey{id: id}
	}
	k := nodeKey{id: id, shared: true}
	if e != nil {
		k.endpoint, k.hasEP = *e, true
	}
	return k
}

// buildSpanTree arranges merged spans into a tree as Zipkin's
// SpanNode.Builder does: a shared (server) span is the child of the client
// span with its ID; a span whose parent is a shared span on its own
// endpoint hangs under that; the first span without a parent is the root
// and spans whose parent is missing hang under the root (a synthetic one
// when no root span exists).
func buildSpanTree(spans []model.Span) *spanNode {
	// Child→parent edges in first-seen order, as Zipkin's LinkedHashMap
	// keeps them; a later put for the same child replaces its parent in
	// place.
	type edge struct {
		child, parent nodeKey
		dead          bool
	}
	var edges []edge
	edgeAt := make(map[nodeKey]int, len(spans))
	putEdge := func(child, parent nodeKey) {
		if i, ok := edgeAt[child]; ok {
			edges[i].parent = parent
			return
		}
		edgeAt[child] = len(edges)
		edges = append(edges, edge{child: child, parent: parent})
	}
	for i := range spans {
		sp := &spans[i]
		if sp.Shared {
			// A server's parent is the client with its ID.
			putEdge(keyFor(sp.ID, true, sp.LocalEndpoint), nodeKey{id: sp.ID})
		} else {
			putEdge(nodeKey{id: sp.ID}, nodeKey{id: sp.ParentID}) // ID 0: no parent
		}
	}

	nodes := make(map[nodeKey]*spanNode, len(spans))
	var root *spanNode
	for i := range spans {
		sp := &spans[i]
		key := keyFor(sp.ID, sp.Shared, sp.LocalEndpoint)
		noEPKey := keyFor(sp.ID, sp.Shared, nil)
		hasParent := sp.Shared
		if !sp.Shared && sp.ParentID != 0 {
			hasParent = true
			// A child of a shared server span on the same endpoint (a local
			// span under a server) hangs under that server.
			if p := keyFor(sp.ParentID, true, sp.LocalEndpoint); hasEdge(edgeAt, p) {
				putEdge(noEPKey, p)
			}
		}
		node := &spanNode{span: sp}
		switch {
		case !hasParent && root == nil: // the first root-most span is the root
			root = node
			if i, ok := edgeAt[noEPKey]; ok {
				edges[i].dead = true
			}
		case sp.Shared:
			nodes[key] = node
			nodes[noEPKey] = node
		default:
			nodes[noEPKey] = node
		}
	}
	if root == nil {
		root = &spanNode{}
	}
	for _, e := range edges {
		if e.dead {
			continue
		}
		child := nodes[e.child]
		if child == nil || child == root {
			continue
		}
		parent := nodes[e.parent]
		if parent == nil || parent == child {
			parent = root // headless: spans missing their parent hang under the root
		}
		child.parent = parent
		parent.children = append(parent.children, child)
	}
	return root
}

func hasEdge(m map[nodeKey]int, k nodeKey) bool {
	_, ok := m[k]
	return ok
}
