import { Component, lazy, Suspense, useEffect, useMemo, useRef, useState, type ErrorInfo, type ReactNode } from "react";
import { Link, NavLink, Route, Routes, useLocation, useNavigate } from "react-router";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { ApiContext } from "./api/context";
import { ApiError, createApi } from "./api/client";
import { getToken } from "./api/auth";
import { applyTheme, nextTheme, storedTheme, type ThemeChoice } from "./lib/theme";
import { TaskList } from "./pages/TaskList";
import { SignIn } from "./pages/SignIn";

// The task list is the first page, so it ships in the entry chunk; every
// other page is its own chunk, loaded when its route is visited.
const NewTask = lazy(() => import("./pages/NewTask"));
const TaskDetail = lazy(() => import("./pages/TaskDetail"));
const Schedules = lazy(() => import("./pages/Schedules"));
const Server = lazy(() => import("./pages/Server"));
const Sessions = lazy(() => import("./pages/Sessions"));
const SessionLive = lazy(() => import("./pages/SessionLive"));
const Agents = lazy(() => import("./pages/Agents"));
const Usage = lazy(() => import("./pages/Usage"));
const Pieces = lazy(() => import("./pages/Pieces"));

export interface AppProps {
  // fetch replaces the browser's (tests); baseUrl prefixes every API path.
  fetch?: typeof fetch;
  baseUrl?: string;
}

export function App({ fetch: f, baseUrl }: AppProps) {
  const navigate = useNavigate();
  const location = useLocation();
  const where = useRef(location);
  where.current = location;

  const api = useMemo(
    () =>
      createApi({
        baseUrl,
        fetch: f,
        getToken,
        onUnauthorized: () => {
          const cur = where.current;
          if (cur.pathname === "/signin") return;
          const next = cur.pathname + cur.search;
          navigate(`/signin?next=${encodeURIComponent(next)}`, { replace: true });
        },
      }),
    [baseUrl, f, navigate],
  );
  const queryClient = useMemo(
    () =>
      new QueryClient({
        defaultOptions: {
          queries: {
            retry: (n, err) => !(err instanceof ApiError && err.status < 500) && n < 2,
            refetchOnWindowFocus: true,
          },
        },
      }),
    [],
  );

  return (
    <ApiContext.Provider value={api}>
      <QueryClientProvider client={queryClient}>
        <Layout>
          <PageError path={location.pathname}>
            <Suspense fallback={<p className="p-4 text-sm">Loading…</p>}>
              <Routes>
                <Route path="/" element={<TaskList />} />
                <Route path="/tasks" element={<TaskList />} />
                <Route path="/tasks/new" element={<NewTask />} />
                <Route path="/tasks/:id" element={<TaskDetail />} />
                <Route path="/schedules" element={<Schedules />} />
                <Route path="/server" element={<Server />} />
                <Route path="/sessions" element={<Sessions />} />
                <Route path="/sessions/:id" element={<SessionLive />} />
                <Route path="/agents" element={<Agents />} />
                <Route path="/usage" element={<Usage />} />
                <Route path="/pieces/*" element={<Pieces />} />
                <Route path="/signin" element={<SignIn />} />
                <Route path="*" element={<NoSuchPage path={location.pathname} />} />
              </Routes>
            </Suspense>
          </PageError>
        </Layout>
      </QueryClientProvider>
    </ApiContext.Provider>
  );
}

// NoSuchPage answers an address the app does not have (a mistyped or old
// link): it said only "No such page.", with no heading and no way on but
// the navigation.
function NoSuchPage({ path }: { path: string }) {
  return (
    <div className="space-y-3" aria-labelledby="no-page-h">
      <h1 id="no-page-h" className="text-xl font-semibold">
        No such page
      </h1>
      <p data-testid="no-such-page">
        This console has no page <span className="font-mono break-all">{path}</span>: the link is wrong, or it is of another version.
      </p>
      <Link to="/" className="btn" data-testid="no-such-page-tasks">
        All tasks
      </Link>
    </div>
  );
}

// PageError shows what went wrong when a page cannot be drawn, instead of
// an empty window: most often its code could not be loaded (each page but
// the task list is a chunk fetched when first visited, and the server
// stopped). The navigation stays; visiting another page tries again.
export class PageError extends Component<{ path: string; children: ReactNode }, { error: Error | null; path: string }> {
  state = { error: null as Error | null, path: this.props.path };
  static getDerivedStateFromError(error: Error) {
    return { error };
  }
  // Another page is another try.
  static getDerivedStateFromProps(props: { path: string }, state: { error: Error | null; path: string }) {
    return props.path === state.path ? null : { error: null, path: props.path };
  }
  componentDidCatch(error: Error, info: ErrorInfo) {
    console.error("page failed", error, info.componentStack);
  }
  render() {
    const { error } = this.state;
    if (!error) return this.props.children;
    const load = /dynamically imported module|Importing a module script failed|error loading dynamically/i.test(error.message);
    return (
      <div className="card space-y-2" role="alert" data-testid="page-error">
        <p className="font-semibold">
          {load ? "This page could not be loaded: the server does not answer. Is maestro serve running?" : "This page failed to draw."}
        </p>
        <p className="text-sm text-slate-600 dark:text-slate-400">{error.message}</p>
        <button type="button" className="btn" onClick={() => window.location.reload()}>
          Reload
        </button>
      </div>
    );
  }
}

const navClass = ({ isActive }: { isActive: boolean }) =>
  `rounded px-2 py-1 text-sm font-medium ${
    isActive
      ? "bg-slate-200 text-slate-900 dark:bg-slate-700 dark:text-white"
      : "text-slate-700 hover:bg-slate-100 dark:text-slate-300 dark:hover:bg-slate-800"
  }`;

function Layout({ children }: { children: React.ReactNode }) {
  const [theme, setTheme] = useState<ThemeChoice>(storedTheme);
  // Follow the system's scheme while the choice is "system".
  useEffect(() => {
    if (theme !== "system" || typeof matchMedia !== "function") return;
    const mq = matchMedia("(prefers-color-scheme: dark)");
    const on = () => applyTheme("system");
    mq.addEventListener("change", on);
    return () => mq.removeEventListener("change", on);
  }, [theme]);
  // A page change that removes the focused control (a task's link in the
  // list, a form's submit button that leads to what it made) left the
  // focus on <body>: the next Tab started at the top of the window, and a
  // screen reader was left nowhere. The new page's content takes it. A
  // control that stays (a link of the navigation) keeps it.
  const { pathname } = useLocation();
  const mainRef = useRef<HTMLElement>(null);
  const shownPath = useRef(pathname);
  useEffect(() => {
    if (shownPath.current === pathname) return;
    shownPath.current = pathname;
    const a = document.activeElement;
    if (!a || a === document.body || !a.isConnected) mainRef.current?.focus({ preventScroll: true });
  }, [pathname]);
  const toggle = () => {
    const t = nextTheme(theme);
    applyTheme(t);
    setTheme(t);
  };
  return (
    <div className="min-h-screen">
      {/* Shown when focused, over the header: opaque, inside the window
          (it was transparent at 0,0, its words over "Maestro", its focus
          ring cut by the window's edge). */}
      <a
        href="#main"
        className="sr-only focus:not-sr-only focus:absolute focus:top-2 focus:left-2 focus:z-10 focus:rounded-md focus:bg-white focus:px-3 focus:py-2 focus:text-sm focus:font-medium focus:shadow dark:focus:bg-slate-900"
      >
        Skip to content
      </a>
      <header className="border-b border-slate-200 bg-white dark:border-slate-800 dark:bg-slate-900">
        <div className="mx-auto flex max-w-6xl flex-wrap items-center gap-2 px-3 py-2">
          <span className="mr-2 font-bold">Maestro</span>
          <nav aria-label="Main" className="flex flex-wrap gap-1">
            <NavLink to="/tasks" end data-testid="nav-tasks" className={navClass}>
              Tasks
            </NavLink>
            <NavLink to="/tasks/new" data-testid="nav-new-task" className={navClass}>
              New task
            </NavLink>
            <NavLink to="/schedules" data-testid="nav-schedules" className={navClass}>
              Schedules
            </NavLink>
            <NavLink to="/sessions" data-testid="nav-sessions" className={navClass}>
              Live sessions
            </NavLink>
            <NavLink to="/agents" data-testid="nav-agents" className={navClass}>
              Agent CLIs
            </NavLink>
            <NavLink to="/pieces" data-testid="nav-pieces" className={navClass}>
              Pieces
            </NavLink>
            <NavLink to="/usage" data-testid="nav-usage" className={navClass}>
              Usage
            </NavLink>
            <NavLink to="/server" data-testid="nav-server" className={navClass}>
              Server
            </NavLink>
          </nav>
          <button
            type="button"
            className="btn ml-auto"
            data-testid="theme-toggle"
            aria-label={`Theme: ${theme} (switch)`}
            onClick={toggle}
          >
            {theme === "system" ? "◐ System" : theme === "light" ? "☀ Light" : "☾ Dark"}
          </button>
        </div>
      </header>
      <main id="main" ref={mainRef} tabIndex={-1} className="mx-auto max-w-6xl px-3 py-4 focus:outline-none">
        {children}
      </main>
    </div>
  );
}
