import { useEffect, useState } from 'preact/hooks';
import { listNodes, type ClusterNode, type Creds } from '../api';
import { delay } from '../format';

// NodesPanel: the cluster's nodes for the operator, each with its state
// and its measured delay to the others over NATS (issue 16's link
// monitoring), refreshed every 5 s. Hidden on a lone node.
export function NodesPanel({ creds }: { creds: Creds }) {
  const [nodes, setNodes] = useState<ClusterNode[]>([]);
  const [err, setErr] = useState('');
  useEffect(() => {
    const load = () => listNodes(creds).then((n) => (setNodes(n), setErr('')), (e) => setErr(e.message ?? String(e)));
    load();
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }, [creds.key]);
  if (nodes.length < 2 && !err) return null;
  return (
    <section aria-labelledby="nodes-h">
      <h2 id="nodes-h">Nodes</h2>
      {err && (
        <p role="alert" class="error">
          {err}
        </p>
      )}
      <table class="nodes">
        <caption class="sr-only">Each node's state and its round trip to the other nodes</caption>
        <thead>
          <tr>
            <th scope="col">Node</th>
            <th scope="col">State</th>
            <th scope="col">Delay to other nodes</th>
            <th scope="col">Lossy RTP links</th>
          </tr>
        </thead>
        <tbody>
          {nodes.map((n) => (
            <tr key={n.id} data-testid={'node-' + n.id}>
              <th scope="row">{n.id}</th>
              <td>{n.stale ? `${n.state}, stale` : n.state}</td>
              <td>
                {(n.heartbeat.peers ?? []).length === 0
                  ? '—'
                  : (n.heartbeat.peers ?? []).map((p) => (
                      <span key={p.node} class="peer">
                        {p.node}: {delay(p.rtt_seconds, p.loss)}
                      </span>
                    ))}
              </td>
              <td>{n.heartbeat.rtp_links ? `${n.heartbeat.rtp_links.lossy} of ${n.heartbeat.rtp_links.reporting}` : '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
