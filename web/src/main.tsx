import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { parseRoute, type Route } from './route';
import { takeHandoff } from './move';
import { Home } from './pages/Home';
import { Join } from './pages/Join';
import { Recordings } from './pages/Recordings';
import { Room } from './pages/Room';
import { Watch } from './pages/Watch';
import './style.css';

// route parses the location; a member moved here from another node is
// taken in and its token dropped from the address bar and history.
function route(): Route {
  const r = parseRoute(location.pathname, location.hash);
  if (r.page === 'room' && r.handoff) {
    takeHandoff(sessionStorage, r.session, r.handoff);
    history.replaceState(null, '', location.pathname);
    return { page: 'room', session: r.session };
  }
  return r;
}

function App() {
  const [current, setRoute] = useState<Route>(route());
  useEffect(() => {
    const on = () => setRoute(route());
    addEventListener('popstate', on);
    addEventListener('hashchange', on);
    return () => {
      removeEventListener('popstate', on);
      removeEventListener('hashchange', on);
    };
  }, []);
  switch (current.page) {
    case 'join':
      return <Join session={current.session} joinToken={current.joinToken} />;
    case 'room':
      return <Room session={current.session} />;
    case 'recordings':
      return <Recordings />;
    case 'watch':
      return <Watch session={current.session} token={current.token} />;
    default:
      return <Home />;
  }
}

render(<App />, document.getElementById('app')!);
