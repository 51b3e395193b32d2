import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { parseRoute, type Route } from './route';
import { Home } from './pages/Home';
import { Join } from './pages/Join';
import { Recordings } from './pages/Recordings';
import { Room } from './pages/Room';
import { Watch } from './pages/Watch';
import './style.css';

function App() {
  const [route, setRoute] = useState<Route>(parseRoute(location.pathname, location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.pathname, location.hash));
    addEventListener('popstate', on);
    addEventListener('hashchange', on);
    return () => {
      removeEventListener('popstate', on);
      removeEventListener('hashchange', on);
    };
  }, []);
  switch (route.page) {
    case 'join':
      return <Join session={route.session} joinToken={route.joinToken} />;
    case 'room':
      return <Room session={route.session} />;
    case 'recordings':
      return <Recordings />;
    case 'watch':
      return <Watch session={route.session} token={route.token} />;
    default:
      return <Home />;
  }
}

render(<App />, document.getElementById('app')!);
