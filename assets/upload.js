// Uploads: a native file chooser, then a streaming multipart POST to /upload.
// Callbacks only ever see the server's answer ({id, name, size} or {error}), never the bytes.
(function () {
  function choose(accept, multiple) {
    return new Promise(function (resolve) {
      var input = document.createElement("input");
      input.type = "file";
      input.accept = accept;
      input.multiple = multiple;
      input.style.display = "none";
      input.addEventListener("change", function () { resolve(Array.from(input.files || [])); input.remove(); });
      input.addEventListener("cancel", function () { resolve([]); input.remove(); });
      document.body.appendChild(input);
      input.click();
    });
  }

  async function send(file, kind) {
    var form = new FormData();
    form.append("kind", kind);
    form.append("file", file, file.name);
    var body;
    try {
      var response = await fetch("upload", { method: "POST", body: form, credentials: "same-origin" });
      try { body = await response.json(); } catch (e) { body = { error: "the server answered HTTP " + response.status }; }
    } catch (e) {
      body = { error: "the upload failed: " + e };
    }
    return Object.assign({ name: file.name, size: file.size }, body);
  }

  // what each kind of upload's chooser offers (the server checks the kind and the bytes again)
  var ACCEPT = {
    model: ".skops,.onnx,.json,.ubj,.txt,.cbm,.model,.bst,.zip,.pkl,.pickle,.joblib",
    data: ".csv,.parquet,.pq",
    labels: ".json,application/json",
  };

  window.wipUpload = {
    pick: async function (n, kind, multiple, current) {
      if (!n) { return window.dash_clientside.no_update; }
      var accept = ACCEPT[kind];
      if (!accept) { return window.dash_clientside.no_update; }
      var files = await choose(accept, multiple);
      if (!files.length) { return window.dash_clientside.no_update; }
      var answers = [];
      for (var i = 0; i < files.length; i++) { answers.push(await send(files[i], kind)); }
      return multiple ? answers : answers[0];
    }
  };
})();
