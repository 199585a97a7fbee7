// A fetch that keeps every exchange as the SDK read it: method, path, status, headers and the
// response body's bytes (base64), which the test compares with the run's events on Kafka.
export function keepingFetch(exchanges) {
  return async (input, init) => {
    const request = new Request(input, init);
    const response = await fetch(request);
    const exchange = {
      method: request.method, path: new URL(request.url).pathname, status: response.status,
      headers: Object.fromEntries(response.headers), body: "",
    };
    exchanges.push(exchange);
    if (!response.body) {
      exchange.read = Promise.resolve();
      return response;
    }
    // The SDK reads one branch; the other is read to its end here, whatever the SDK does.
    const [forSdk, kept] = response.body.tee();
    exchange.read = new Response(kept).arrayBuffer().then((bytes) => {
      exchange.body = Buffer.from(bytes).toString("base64");
    });
    return new Response(forSdk, {
      status: response.status, statusText: response.statusText, headers: response.headers,
    });
  };
}

export async function settled(exchanges) {
  await Promise.all(exchanges.map((exchange) => exchange.read));
  return exchanges.map(({ method, path, status, headers, body }) => (
    { method, path, status, headers, body }));
}
