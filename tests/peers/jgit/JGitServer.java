// A real JGit smart-HTTP server for the integration tests: JGit's GitServlet on an embedded Jetty 9,
// bound to 127.0.0.1, serving every bare repository under a root folder at /<name> (e.g. /repo.git,
// or /org/repo.git for a nested one). Upload-pack and receive-pack are both open to anonymous users.
//
// Usage: java -cp 'lib/*:classes' JGitServer ROOT PORT    (PORT 0: any free port)
//
// Once listening it prints exactly one line, `PORT <n>`, to stdout; everything else goes to stderr.
// It exits when its stdin closes, so a test that dies never leaves a server behind.
//
// Each repository's own config is honoured: UploadPack's constructor reads TransferConfig from the
// repository (uploadpack.allowTipSHA1InWant, uploadpack.allowReachableSHA1InWant, ...), and the
// repository is opened afresh for every request, so a test may change the config while the server
// runs. Note (JGit 4.11): over HTTP (stateless RPC) the default "advertised" policy already accepts a
// want of any commit reachable from a ref; `allowReachableSHA1InWant` only adds the capability line.
//
// Installed and compiled by scripts/peers into target/peers/jgit/.

import java.io.File;
import java.io.IOException;
import java.io.InputStream;

import javax.servlet.http.HttpServletRequest;

import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;
import org.eclipse.jetty.util.thread.QueuedThreadPool;
import org.eclipse.jgit.errors.RepositoryNotFoundException;
import org.eclipse.jgit.http.server.GitServlet;
import org.eclipse.jgit.lib.Repository;
import org.eclipse.jgit.lib.RepositoryCache.FileKey;
import org.eclipse.jgit.storage.file.FileRepositoryBuilder;
import org.eclipse.jgit.transport.ReceivePack;
import org.eclipse.jgit.transport.UploadPack;
import org.eclipse.jgit.util.FS;

public final class JGitServer {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: JGitServer ROOT PORT");
            System.exit(2);
        }
        // slf4j-simple (when on the class path): warnings and errors only, to stderr.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");

        final File root = new File(args[0]).getCanonicalFile();
        if (!root.isDirectory()) {
            System.err.println("JGitServer: not a folder: " + root);
            System.exit(2);
        }
        int port = Integer.parseInt(args[1]);

        GitServlet git = new GitServlet();
        git.setRepositoryResolver((HttpServletRequest req, String name) -> open(root, name));
        // UploadPack(db) reads the repository's TransferConfig itself (same as the default factory,
        // without its http.uploadpack switch).
        git.setUploadPackFactory((HttpServletRequest req, Repository db) -> new UploadPack(db));
        // The default ReceivePackFactory refuses anonymous pushes (unless http.receivepack=true).
        git.setReceivePackFactory((HttpServletRequest req, Repository db) -> new ReceivePack(db));

        QueuedThreadPool threads = new QueuedThreadPool(32, 4);
        threads.setDaemon(true);
        Server server = new Server(threads);
        ServerConnector connector = new ServerConnector(server, 1, 1);
        connector.setHost("127.0.0.1");
        connector.setPort(port);
        server.addConnector(connector);
        ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
        context.setContextPath("/");
        context.addServlet(new ServletHolder(git), "/*");
        server.setHandler(context);
        server.setStopAtShutdown(false);

        Thread stdinWatch = new Thread(() -> {
            byte[] buf = new byte[256];
            try {
                InputStream in = System.in;
                while (in.read(buf) >= 0) {
                    // discard
                }
            } catch (IOException e) {
                // treat as closed
            }
            System.exit(0);
        }, "stdin-watch");
        stdinWatch.setDaemon(true);
        stdinWatch.start();

        server.start();
        System.out.println("PORT " + connector.getLocalPort());
        System.out.flush();
        server.join();
    }

    /** `<root>/<name>` if it is a bare repository inside root, else RepositoryNotFoundException. */
    static Repository open(File root, String name) throws RepositoryNotFoundException {
        File dir;
        try {
            dir = new File(root, name).getCanonicalFile();
        } catch (IOException e) {
            throw new RepositoryNotFoundException(name, e);
        }
        if (!dir.toPath().startsWith(root.toPath()) || dir.equals(root)
                || !FileKey.isGitRepository(dir, FS.DETECTED)) {
            throw new RepositoryNotFoundException(name);
        }
        Repository db;
        try {
            db = new FileRepositoryBuilder().setGitDir(dir).setMustExist(true).build();
        } catch (IOException e) {
            throw new RepositoryNotFoundException(name, e);
        }
        if (!db.isBare()) {
            db.close();
            throw new RepositoryNotFoundException(name);
        }
        return db;
    }
}
